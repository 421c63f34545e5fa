import type { RateLimitAlgorithm } from '../../lib/algorithms/algorithm.interface';
import { DENY_KEY_SUFFIX } from '../../lib/shared/keys';
import { DecideCall, onePolicyCall } from '../../lib/stores/redis/redis-codec';
import type { RateLimitCall } from '../../lib/stores/store.interface';

/** rate-limiter-flexible's RateLimiterRedis script (lib/RateLimiterRedis.js), copied verbatim for scale. */
export const RLF_SCRIPT = `redis.call('set', KEYS[1], 0, 'EX', ARGV[2], 'NX') \
local consumed = redis.call('incrby', KEYS[1], ARGV[1]) \
local ttl = redis.call('pttl', KEYS[1]) \
if ttl == -1 then \
  redis.call('expire', KEYS[1], ARGV[2]) \
  ttl = 1000 * ARGV[2] \
end \
return {consumed, ttl} \
`;

/** rate-limiter-flexible's EVALSHA words for one consume of 1 point of `points` per window (60 s) on `key`. */
export function rlfArgs(key: string, points: number, windowMs = WINDOW_MS): (sha: string) => string[] {
  const seconds = String(windowMs / 1000);
  return (sha) => ['EVALSHA', sha, '1', key, '1', seconds, String(points), seconds];
}

/** Window of every script case, ms. */
export const WINDOW_MS = 60_000;

/** A consume of 1 unit of `algorithm` on `tracker`, with the keys the store builds (`<prefix>:{<tracker>}:…`). */
function consumeCall(algorithm: RateLimitAlgorithm, tracker: string, limit: number, windowMs = WINDOW_MS): RateLimitCall {
  const prefix = `rl:{${tracker}}:`;
  const base = `${prefix}svc:default:`;
  return {
    algorithm,
    cost: 1,
    params: { limit, windowMs, burst: limit },
    blockForMs: 0,
    token: '',
    stateKey: base + algorithm.keyTag,
    blockKey: `${base}b`,
    denyKey: prefix + DENY_KEY_SUFFIX,
  } as RateLimitCall;
}

/**
 * KEYS and ARGV of a one-policy decision, the script the store sends for one policy's decision (algorithms/one-policy.lua,
 * encoded by onePolicyCall): the policy's state and block keys (no deny key); one argument of
 * cost, limit, window ms, blockFor ms and, for the algorithms whose capacity it is, burst, joined by spaces.
 */
export function onePolicyArgs(
  algorithm: RateLimitAlgorithm,
  tracker: string,
  limit: number,
  windowMs = WINDOW_MS,
): (sha: string) => string[] {
  const { keys, args } = onePolicyCall(consumeCall(algorithm, tracker, limit, windowMs), 'c');
  return (sha) => ['EVALSHA', sha, String(keys.length), ...keys, ...args];
}

/**
 * KEYS and ARGV of a batch of `size` decisions in one call of decide.lua (what a standalone Redis gets when
 * decisions of several trackers meet in one tick), each on its own tracker: `${tracker}-<i>`.
 */
export function batchArgs(
  algorithm: RateLimitAlgorithm,
  tracker: string,
  limit: number,
  size: number,
  windowMs = WINDOW_MS,
): (sha: string) => string[] {
  const call = new DecideCall();
  for (let i = 0; i < size; i++) call.add([consumeCall(algorithm, `${tracker}-${i}`, limit, windowMs)], 'c');
  return (sha) => ['EVALSHA', sha, String(call.keys.length), ...call.keys, ...call.args];
}
