/**
 * The one-policy script's wire format (algorithms/one-policy.lua: one space-joined argument, a reply without its zero
 * slots) against decide.lua's (one JSON array, six slots per decision): the encoder's layouts, the parser
 * giving the decision parseDecision gives for the same verdict, and on redis-server both scripts deciding the
 * same sequence for every algorithm, run back to back in one MULTI on twin trackers, so they read one clock.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithm } from '../../lib/algorithms/algorithm.interface';
import { DecideCall, onePolicyCall, luaScript, parseDecision, parseOnePolicyReply } from '../../lib/stores/redis/redis-codec';
import { composeDecideScript, composeOnePolicyScript } from '../../lib/stores/redis/redis-scripts';
import { ServerClock } from '../../lib/stores/redis/server-clock';
import type { RateLimitCall, StoreDecision } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';
import { startRedis, type RedisProcess } from '../support/redis-server';

const registry = new RateLimitAlgorithmRegistry();

function call(algorithm: RateLimitAlgorithm, tracker: string, cost: number, over: Partial<RateLimitCall> = {}): RateLimitCall {
  return {
    algorithm,
    params: { limit: 3, windowMs: 60_000, burst: 3 },
    cost,
    blockForMs: 0,
    token: '',
    stateKey: `lone:{${tracker}}:s:${algorithm.keyTag}`,
    blockKey: `lone:{${tracker}}:b`,
    denyKey: `lone:{${tracker}}:d`,
    ...over,
  } as RateLimitCall;
}

describe('the one-policy call encoding', () => {
  const fixed = registry.get('fixed-window');
  const gcra = registry.get('gcra');
  const concurrency = registry.get('concurrency');

  // Numbers in hex; a second argument 't' when a fixed-window script must read the server's clock.
  it.each([
    ['a consume', call(fixed, 't', 2, { blockForMs: 500 }), 'c', ['2 3 ea60 1f4']],
    ['a peek (no lockout to start)', call(fixed, 't', 1, { blockForMs: 500 }), 'p', ['1 3 ea60 p', 't']],
    ['a consume that may be settled', call(fixed, 't', 1, { refundable: true }), 'c', ['1 3 ea60 0', 't']],
    ['a consume granting a slice', call(fixed, 't', 1, { slice: 2 }), 'c', ['1 3 ea60 0', 't']],
    ['a window under 10 s', call(fixed, 't', 1, { params: { limit: 3, windowMs: 9_999, burst: 3 } } as never), 'c', ['1 3 270f 0', 't']],
    ['a reserve: units held back after a +', call(fixed, 't', 3, { hold: 20 }), 'c', ['3+14 3 ea60 0']],
    ['a window of 10 s', call(fixed, 't', 1, { params: { limit: 3, windowMs: 10_000, burst: 3 } } as never), 'c', ['1 3 2710 0']],
    [
      'burst, for an algorithm whose capacity it is',
      call(gcra, 't', 1, { params: { limit: 3, windowMs: 1000, burst: 7 } } as never),
      'c',
      ['1 3 3e8 0 7'],
    ],
    ['a token, last and as it is', call(concurrency, 't', -2, { token: 'lease a b' }), 'c', ['n2 3 ea60 0 lease a b']],
    ['no token', call(concurrency, 't', 1), 'p', ['1 3 ea60 p']],
  ])('%s', (_, c, mode, expected) => {
    const { keys, args } = onePolicyCall(c, mode);
    // No deny key: each instance answers a denied tracker before any script (the deny list).
    expect(keys).toEqual([c.stateKey, c.blockKey]);
    expect(args).toEqual(expected);
  });

  it.each([
    ['allowed', [0, 2, 1000, 0, 0, 1000], [0, 2, 1000, 1000]],
    ['allowed with a delay', [0, 2, 1000, 0, 250, 1000], [0, 2, 1000, 1000, 0, 250]],
    ['limited', [Verdict.Limited, 0, 1000, 400, 0, 1000], [Verdict.Limited, 0, 1000, 1000, 400]],
    ['cost above capacity', [Verdict.CostExceedsCapacity, 3, 0, -1, 0, 0], [Verdict.CostExceedsCapacity, 3, 0, 0, -1]],
    ['blocked', [Verdict.Blocked, 0, 500, 500, 0, 500], [Verdict.Blocked, 0, 500, 500, 500]],
  ])('parseOnePolicyReply reads %s as parseDecision reads decide.lua', (_, general, lone) => {
    const now = 1_795_000_000_123;
    expect(parseOnePolicyReply([now, ...lone])).toEqual(parseDecision([now, ...general] as number[], 1, 1));
  });
});

describe('on redis-server, the one-policy script decides as decide.lua does', () => {
  let redis: RedisProcess;
  let client: Redis;

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url);
  });

  afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
  });

  const clock = new ServerClock();

  /** One decision by each script, on twin trackers, in one MULTI; again until both read the same ms. */
  async function both(lone: RateLimitCall, general: RateLimitCall, mode: string): Promise<[StoreDecision, StoreDecision]> {
    const onePolicyScript = luaScript(composeOnePolicyScript(lone.algorithm));
    const decideScript = luaScript(composeDecideScript([lone.algorithm]));
    for (let attempt = 0; ; attempt++) {
      const { keys: lk, args: la } = onePolicyCall(lone, mode);
      const { keys: gk, args: ga } = new DecideCall().add([general], mode);
      const results = await client
        .multi()
        .eval(onePolicyScript.lua, lk.length, ...lk, ...la)
        .eval(decideScript.lua, gk.length, ...gk, ...ga)
        .exec();
      const [[e1, r1], [e2, r2]] = results!;
      if (e1 || e2) throw e1 ?? e2;
      // decide.lua read the clock; the one-policy script of a fixed-window of 60 s may not have (its now is then
      // found from its window, as the store does).
      const b = clock.complete(parseDecision(r2 as number[], 1, 1), general.params.windowMs);
      const a = clock.complete(parseOnePolicyReply(r1 as number[]), lone.params.windowMs);
      if (a.nowMs === b.nowMs) return [a, b];
      // The two reads of the clock straddled a millisecond: a peek charged nothing and is asked again; a
      // consume moved both states, at different times (the caller starts over).
      if (mode !== 'p' || attempt > 20) throw new Error('the twin decisions read different milliseconds');
    }
  }

  it.each(registry.all().map((a) => [a.name, a] as const))('%s', async (_, algorithm) => {
    const twins = (cost: number, over: Partial<RateLimitCall> = {}) =>
      [call(algorithm, `l-${algorithm.name}`, cost, over), call(algorithm, `g-${algorithm.name}`, cost, over)] as const;
    // A lease id with spaces (the one-policy argument's last value, taken as it is); one lease per step.
    const steps: Array<[number, string, Partial<RateLimitCall>]> = [
      [1, 'c', { token: 'lease a 1' }],
      // A renewal (negative cost) of the first lease, for the algorithm that has them.
      ...(algorithm.name === 'concurrency' ? [[-1, 'c', { token: 'lease a 1' }] as [number, string, Partial<RateLimitCall>]] : []),
      [1, 'p', { token: 'lease a 2' }],
      [10, 'p', { token: 'lease a 3' }],
      [10, 'c', { token: '' }],
      [2, 'c', { token: 'lease a 4' }],
      [1, 'c', { token: 'lease a 5' }],
      [1, 'c', { token: 'lease a 6', blockForMs: 800 }],
      [1, 'p', { token: 'lease a 7' }],
      [1, 'c', { token: 'lease a 8' }],
    ];
    // A consume whose twins read different milliseconds moved the two states apart: the sequence starts over.
    for (let attempt = 1; ; attempt++) {
      await client.flushall();
      const decided: Array<[StoreDecision, StoreDecision]> = [];
      try {
        for (const [cost, mode, over] of steps) decided.push(await both(...twins(cost, over), mode));
      } catch (error) {
        if (attempt < 50 && error instanceof Error && error.message.includes('different milliseconds')) continue;
        throw error;
      }
      for (const [a, b] of decided) expect(a).toEqual(b);
      const seen = new Set(decided.map(([a]) => a.verdicts[0].reason));
      expect(seen).toEqual(new Set([Verdict.Allowed, Verdict.Limited, Verdict.Blocked, Verdict.CostExceedsCapacity]));
      break;
    }
    // A 1.0 deny key, with a reason and without, set on both trackers: neither script reads it (the deny list
    // answers denies before any script runs).
    for (const value of [`${Date.now() + 600_000}|no more`, `${Date.now() + 600_000}`]) {
      await client.set(`lone:{l-${algorithm.name}}:d`, value);
      await client.set(`lone:{g-${algorithm.name}}:d`, value);
      const [a, b] = await both(...twins(1), 'p');
      expect(a).toEqual(b);
      expect(a.verdicts[0].reason).not.toBe(Verdict.Denied);
    }
  });
});
