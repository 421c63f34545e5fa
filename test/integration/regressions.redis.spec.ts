/**
 * One test (group) per flaw of the reference articles listed at the end of shared/ALGORITHMS.md, on a real
 * Redis, so that none of them comes back:
 *  1. fixed window INCR + EXPIRE as two commands (immortal key on a crash) and EXPIRE in seconds (no
 *     sub-second windows);
 *  2. sliding log: same-millisecond requests collapsing into one member; non-atomic races; rejected
 *     requests logged (a client over the limit locked out forever);
 *  3. token bucket: inverted check, refill that floors fractions away, state in two keys without one hash tag;
 *  4. leaky bucket that stores capacity and rate on first use (a later config change ignored);
 *  5. timestamps from the app (skewed instances disagree);
 *  6. in-process counters: covered by concurrency.redis.spec.ts (four processes share one quota).
 * Exact values are computed from the server time each decision reports (`nowMs`).
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { StoreDecision } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { ceilDiv } from '../../lib/shared/math';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { runWorkers } from '../support/workers';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const BUCKETS: readonly RateLimitAlgorithmName[] = ['token-bucket', 'gcra', 'leaky-bucket'];

const registry = new RateLimitAlgorithmRegistry();
let redis: RedisProcess;
let admin: Redis;
let client: Redis;
let store: RedisStore;
let engine: RateLimitEngine;
let service: RateLimiterService;
let trackers = 0;

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis({ port: redis.port });
  client = new Redis({ port: redis.port, enableAutoPipelining: true });
  store = new RedisStore(client, registry.all(), false);
  engine = new RateLimitEngine(store);
  service = new RateLimiterService(engine, registry, { prefix: 'rl' });
}, 30_000);

afterAll(async () => {
  client?.disconnect();
  admin?.disconnect();
  await redis?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const serverMs = async () => {
  const [sec, usec] = await admin.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
};
/** Sleeps until the Redis clock reads at least `target` ms. */
async function untilServerMs(target: number): Promise<number> {
  for (;;) {
    const now = await serverMs();
    if (now >= target) return now;
    await sleep(target - now);
  }
}

const freshTracker = (label: string) => `${label}-${++trackers}`;

/** One store decision for `policies` (one call, all-or-nothing) on `tracker`; `cost` for every policy. */
function decide(policies: RateLimitPolicy[], tracker: string, mode: 'consume' | 'peek' = 'consume', cost = 1): Promise<StoreDecision> {
  const requests = policies.map((policy) => {
    const compiled = compilePolicy(policy, registry, 'test', 'svc');
    return { compiled, params: compiled.staticParams!, cost };
  });
  return store.decide(engine.calls(trackerKeyPrefix('rl', tracker), requests), mode);
}

/** The keys written for `tracker`, with their TTLs. */
async function keysOf(tracker: string): Promise<Array<{ key: string; pttl: number }>> {
  const keys = (await admin.keys(`rl:{${tracker}}:*`)).sort();
  return Promise.all(keys.map(async (key) => ({ key, pttl: await admin.pttl(key) })));
}

/** The keys written for `tracker` with their absolute expiry (server ms), read in one atomic script. */
async function expiriesOf(tracker: string): Promise<Array<{ key: string; expiresAt: number }>> {
  const flat = (await admin.eval(
    "local out = {} for _, k in ipairs(redis.call('KEYS', ARGV[1])) do out[#out + 1] = k; out[#out + 1] = redis.call('PEXPIRETIME', k) end return out",
    0,
    `rl:{${tracker}}:*`,
  )) as Array<string | number>;
  const out: Array<{ key: string; expiresAt: number }> = [];
  for (let i = 0; i < flat.length; i += 2) out.push({ key: String(flat[i]), expiresAt: Number(flat[i + 1]) });
  return out;
}

/** The logical content of a key (hash fields or sorted-set entries) and its absolute expiry. */
async function snapshot(key: string): Promise<unknown> {
  const type = await admin.type(key);
  const value =
    type === 'hash' ? await admin.hgetall(key) : type === 'zset' ? await admin.zrange(key, 0, '-1', 'WITHSCORES') : await admin.get(key);
  return { type, value, expiresAt: await admin.pexpiretime(key) };
}

/** Redis Cluster's hash tag of a key: the part between the first `{` and the next `}`. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : key;
}

describe('1. fixed window INCR + EXPIRE: no immortal key, sub-second windows', () => {
  test('after one consume of every algorithm (single, multi-policy, lockout, refund) no key lacks a TTL', async () => {
    const tracker = freshTracker('ttl');
    for (const algorithm of ALGORITHMS) {
      const policy: RateLimitPolicy = { algorithm, limit: 3, window: 60_000, name: `one-${algorithm}` };
      expect((await decide([policy], tracker)).allowed).toBe(true);
    }
    // All seven in one all-or-nothing call.
    const all = ALGORITHMS.map((algorithm, i): RateLimitPolicy => ({ algorithm, limit: 3, window: 60_000, name: `all-${i}` }));
    expect((await decide(all, tracker)).allowed).toBe(true);
    // A lockout key.
    const locked: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1, window: 60_000, name: 'locked', blockFor: 30_000 };
    expect((await decide([locked], tracker)).allowed).toBe(true);
    const rejected = await decide([locked], tracker);
    // The wait is the longer of the lockout and the window's own end.
    const windowEnds = (Math.floor(rejected.nowMs / 60_000) + 1) * 60_000 - rejected.nowMs;
    const wait = Math.max(30_000, windowEnds);
    expect(rejected.verdicts[0]).toEqual({
      allowed: false,
      remaining: 0,
      resetMs: wait,
      moreQuotaMs: wait,
      retryAfterMs: wait,
      delayMs: 0,
      reason: Verdict.Blocked,
    });
    expect(await admin.pttl(trackerKeyPrefix('rl', tracker) + 'svc:locked:b')).toBeLessThanOrEqual(30_000);
    // A refund of each.
    for (const algorithm of ALGORITHMS) {
      const policy: RateLimitPolicy = { algorithm, limit: 3, window: 60_000, name: `refund-${algorithm}` };
      const { calls } = await engine.decide(
        trackerKeyPrefix('rl', tracker),
        [{ compiled: compilePolicy(policy, registry, 'test', 'svc'), params: { limit: 3, windowMs: 60_000, burst: 3 }, cost: 2 }],
        'consume',
      );
      await engine.refund(calls);
      await engine.refund(calls);
    }

    const keys = await keysOf(tracker);
    expect(keys.length).toBeGreaterThanOrEqual(ALGORITHMS.length * 2 + 1);
    // Every key has a TTL, none longer than needed (2 windows at most: sliding-window's previous count).
    expect(keys.filter(({ pttl }) => !(pttl > 0 && pttl <= 120_000))).toEqual([]);
    expect((await admin.keys('*')).filter((k) => !k.startsWith('rl:'))).toEqual([]);
  });

  test('the decision is one script: a client that dies mid-flood leaves no key without a TTL', async () => {
    const tracker = freshTracker('crash');
    const victim = new Redis({ port: redis.port, enableAutoPipelining: true });
    const victimStore = new RedisStore(victim, registry.all(), false);
    const victimEngine = new RateLimitEngine(victimStore);
    await victim.ping();
    const pending: Promise<unknown>[] = [];
    for (const algorithm of ALGORITHMS) {
      const compiled = compilePolicy({ algorithm, limit: 100, window: 60_000 }, registry, 'test', 'svc');
      for (let i = 0; i < 50; i++)
        pending.push(
          victimStore
            .decide(victimEngine.calls(trackerKeyPrefix('rl', tracker), [{ compiled, params: compiled.staticParams!, cost: 1 }]), 'consume')
            .catch(() => undefined),
        );
    }
    // The app dies with its calls in flight.
    setImmediate(() => victim.disconnect());
    await Promise.all(pending);
    await sleep(20);
    expect((await keysOf(tracker)).filter(({ pttl }) => pttl <= 0)).toEqual([]);
  });

  test.each(ALGORITHMS)(
    '%s: a 150 ms window expires in 150 ms (sliding-window: 300 ms) and the quota is whole again',
    async (algorithm) => {
      let tracker = '';
      const policy: RateLimitPolicy = { algorithm, limit: 3, window: 150 };
      const bound = algorithm === 'sliding-window' ? 300 : 150;
      let last = 0;
      let ended = 0;
      let expiries: Array<{ key: string; expiresAt: number }> = [];
      // A machine that stalls longer than the window lets the key expire before it is read, and one that
      // stalls between the last decision and the next read loosens the bound below; such an attempt proves
      // little, so it starts over on a fresh tracker.
      for (let attempt = 0; attempt < 20 && (expiries.length === 0 || ended - last > 50); attempt++) {
        tracker = freshTracker(`subsecond-${algorithm}`);
        for (let i = 0; i < 3; i++) {
          const d = await decide([policy], tracker);
          expect(d.verdicts[0].allowed).toBe(true);
          last = d.nowMs;
        }
        ended = await serverMs();
        expiries = await expiriesOf(tracker);
      }
      expect(expiries).toHaveLength(1);
      const keys = expiries;
      // Absolute expiry: after the last write, and no later than the window (two for sliding-window) after it.
      // A relative expiry (PEXPIRE, SET … PX) counts from Redis's clock when the command runs, which on a busy
      // machine can be a millisecond or more after the script read TIME: the bound is the window after the last
      // decision had ended (a server time read once it had).
      expect(keys[0].expiresAt).toBeGreaterThan(last);
      expect(keys[0].expiresAt).toBeLessThanOrEqual(ended + bound);
      await sleep(algorithm === 'sliding-window' ? 320 : 200);
      await untilServerMs(keys[0].expiresAt + 1);
      expect(await admin.exists(keys[0].key)).toBe(0);
      const after = await decide([policy], tracker, 'peek', 0);
      expect(after.verdicts[0]).toEqual({
        allowed: true,
        remaining: 3,
        resetMs: 0,
        moreQuotaMs: 0,
        retryAfterMs: 0,
        delayMs: 0,
        reason: Verdict.Allowed,
      });
    },
  );
});

describe('2. sliding log', () => {
  test('same-millisecond requests are each counted: 10 in one ms with limit 5 admit exactly 5 and log 5 members', async () => {
    const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 5, window: 60_000 };
    // Fire 10 in one pipeline write; retry with a fresh key until all ten ran in the same server millisecond.
    for (let attempt = 0; attempt < 50; attempt++) {
      const tracker = freshTracker('same-ms');
      const decisions = await Promise.all(Array.from({ length: 10 }, () => decide([policy], tracker)));
      if (new Set(decisions.map((d) => d.nowMs)).size !== 1) continue;
      const now = decisions[0].nowMs;
      expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
      expect(decisions.map((d) => d.verdicts[0].remaining)).toEqual([4, 3, 2, 1, 0, 0, 0, 0, 0, 0]);
      const [{ key }] = await keysOf(tracker);
      expect(await admin.zcard(key)).toBe(5);
      const entries = await admin.zrange(key, 0, '-1', 'WITHSCORES');
      const members = entries.filter((_, i) => i % 2 === 0);
      const scores = entries.filter((_, i) => i % 2 === 1);
      expect(new Set(members).size).toBe(5);
      expect(scores).toEqual([now, now, now, now, now].map(String));
      // One call of cost 3 in one millisecond logs three entries too.
      const bulk = freshTracker('same-ms-cost');
      expect((await decide([policy], bulk, 'consume', 3)).verdicts[0].remaining).toBe(2);
      expect(await admin.zcard((await keysOf(bulk))[0].key)).toBe(3);
      return;
    }
    throw new Error('could not get 10 decisions into one server millisecond in 50 attempts');
  });

  test('no race: 200 concurrent requests over 4 connections with limit 10 admit exactly 10', async () => {
    const connections = Array.from({ length: 4 }, () => new Redis({ port: redis.port, enableAutoPipelining: true }));
    try {
      const services = connections.map(
        (c) => new RateLimiterService(new RateLimitEngine(new RedisStore(c, registry.all(), false)), registry, { prefix: 'rl' }),
      );
      const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 10, window: 60_000 };
      const tracker = freshTracker('race');
      const decisions = await Promise.all(Array.from({ length: 200 }, (_, i) => services[i % 4].consume(policy, tracker)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(10);
      expect(await admin.zcard((await admin.keys(`rl:{by%3A${tracker}}:*`))[0])).toBe(10); // the service key is the tracker by:<key>
    } finally {
      for (const c of connections) c.disconnect();
    }
  });

  test('rejected requests are never logged: hammered past the limit, a client is allowed again one window after its last admitted request', async () => {
    const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 3, window: 300 };
    const tracker = freshTracker('hammer');
    const admitted: number[] = [];
    for (let i = 0; i < 3; i++) {
      const d = await decide([policy], tracker);
      expect(d.allowed).toBe(true);
      admitted.push(d.nowMs);
    }
    // Hammer for 250 ms: every call rejected, with the exact retry (when the oldest entry ages out).
    let rejections = 0;
    for (;;) {
      const d = await decide([policy], tracker);
      if (d.nowMs >= admitted[2] + 250) break;
      expect(d.verdicts[0]).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: admitted[2] + 300 - d.nowMs,
        moreQuotaMs: admitted[0] + 300 - d.nowMs,
        retryAfterMs: admitted[0] + 300 - d.nowMs,
        delayMs: 0,
        reason: Verdict.Limited,
      });
      rejections++;
      await sleep(2);
    }
    expect(rejections).toBeGreaterThanOrEqual(10);
    expect(await admin.zcard((await keysOf(tracker))[0].key)).toBe(3);
    // One window after the last admitted request the whole quota is back (logged rejections would still block).
    await untilServerMs(admitted[2] + 301);
    const back = await decide([policy], tracker, 'consume', 3);
    expect(back.verdicts[0]).toEqual({
      allowed: true,
      remaining: 0,
      resetMs: 300,
      moreQuotaMs: 300,
      retryAfterMs: 0,
      delayMs: 0,
      reason: Verdict.Allowed,
    });
  });

  test('a refund of cost 0 gives nothing back and does not fail the script (the other policies of the call are refunded)', async () => {
    const tracker = freshTracker('refund-zero');
    const prefix = trackerKeyPrefix('rl', tracker);
    const log = compilePolicy({ algorithm: 'sliding-log', limit: 5, window: 60_000, name: 'log' }, registry, 'test', 'svc');
    const bucket = compilePolicy({ algorithm: 'gcra', limit: 5, window: 60_000, name: 'bucket' }, registry, 'test', 'svc');
    expect((await decide([log.policy], tracker, 'consume', 2)).allowed).toBe(true);
    const { calls } = await engine.decide(
      prefix,
      [
        { compiled: log, params: log.staticParams!, cost: 0 },
        { compiled: bucket, params: bucket.staticParams!, cost: 1 },
      ],
      'consume',
    );
    await expect(engine.refund(calls)).resolves.toBeUndefined();
    expect(await admin.zcard(`${prefix}svc:log:sl`)).toBe(2);
    expect(await admin.exists(`${prefix}svc:bucket:g`)).toBe(0); // the one unit was given back: bucket full again
  });

  test.each(ALGORITHMS)('%s: a rejected request changes no state at all', async (algorithm) => {
    const policy: RateLimitPolicy = { algorithm, limit: 3, window: 60_000 };
    const tracker = freshTracker(`untouched-${algorithm}`);
    expect((await decide([policy], tracker, 'consume', 3)).allowed).toBe(true);
    const [{ key }] = await keysOf(tracker);
    const before = await snapshot(key);
    for (let i = 0; i < 20; i++) expect((await decide([policy], tracker, 'consume', 1 + (i % 3))).allowed).toBe(false);
    expect(await snapshot(key)).toEqual(before);
    expect((await keysOf(tracker)).map((k) => k.key)).toEqual([key]);
  });
});

describe('3. token bucket', () => {
  test('the check is not inverted: a full bucket admits, an empty one rejects', async () => {
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 2, window: 60_000 };
    const tracker = freshTracker('tb-check');
    const full = await decide([policy], tracker, 'consume', 2);
    expect(full.verdicts[0]).toEqual({
      allowed: true,
      remaining: 0,
      resetMs: 60_000,
      moreQuotaMs: 30_000,
      retryAfterMs: 0,
      delayMs: 0,
      reason: Verdict.Allowed,
    });
    const empty = await decide([policy], tracker);
    const el = empty.nowMs - full.nowMs;
    expect(empty.verdicts[0]).toEqual({
      allowed: false,
      remaining: 0,
      resetMs: ceilDiv(120_000 - 2 * el, 2),
      moreQuotaMs: ceilDiv(60_000 - 2 * el, 2),
      retryAfterMs: ceilDiv(60_000 - 2 * el, 2),
      delayMs: 0,
      reason: Verdict.Limited,
    });
  });

  test('refill keeps fractions: polled every millisecond, a bucket of 3 per second gives a token back after exactly 334 ms', async () => {
    // 3 tokens per 1000 ms: one token every 333.3 ms. A refill that floors each call's (zero-token) gain and
    // moves the refill time forward would starve a client that keeps asking.
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 3, window: 1000 };
    const tracker = freshTracker('tb-fraction');
    const start = (await decide([policy], tracker, 'consume', 3)).nowMs;
    await untilServerMs(start + 300);
    for (;;) {
      // A refill that loses fractions would never admit again: fail instead of polling forever.
      expect((await serverMs()) - start).toBeLessThan(2000);
      const d = await decide([policy], tracker);
      const el = d.nowMs - start;
      if (el >= 334) {
        // The first call at or after 334 ms.
        expect(d.verdicts[0]).toEqual({
          allowed: true,
          remaining: Math.floor((Math.min(3 * el, 3000) - 1000) / 1000),
          resetMs: ceilDiv(Math.max(3000 - 3 * el, 0) + 1000, 3),
          moreQuotaMs: ceilDiv(1000 - ((Math.min(3 * el, 3000) - 1000) % 1000), 3),
          retryAfterMs: 0,
          delayMs: 0,
          reason: Verdict.Allowed,
        });
        break;
      }
      expect(d.verdicts[0]).toEqual({
        allowed: false,
        remaining: 0,
        resetMs: ceilDiv(3000 - 3 * el, 3),
        moreQuotaMs: 334 - el,
        retryAfterMs: 334 - el,
        delayMs: 0,
        reason: Verdict.Limited,
      });
      await sleep(1);
    }
  });

  test('all keys of one decision share one hash tag (Redis Cluster): every algorithm, plus its lockout key', async () => {
    const tracker = freshTracker('tag:{odd}/tracker');
    const policies = ALGORITHMS.map((algorithm, i): RateLimitPolicy => ({
      algorithm,
      limit: 1,
      window: 60_000,
      name: `p${i}`,
      blockFor: 1000,
    }));
    expect((await decide(policies, tracker)).allowed).toBe(true);
    expect((await decide(policies, tracker)).allowed).toBe(false); // writes the lockout keys
    const prefix = trackerKeyPrefix('rl', tracker);
    const keys = (await admin.keys('rl:*')).filter((k) => k.startsWith(prefix));
    expect(keys).toHaveLength(ALGORITHMS.length * 2);
    expect(new Set(keys.map(hashTag))).toEqual(new Set([hashTag(prefix)]));
  });
});

describe('4. a changed rate takes effect at once', () => {
  test.each(ALGORITHMS)('%s: limit raised from 2 to 5 on the same key', async (algorithm) => {
    const tracker = freshTracker(`raise-${algorithm}`);
    const W = 60_000;
    const before: RateLimitPolicy = { algorithm, limit: 2, window: W };
    const after: RateLimitPolicy = { algorithm, limit: 5, window: W };
    const first = await decide([before], tracker, 'consume', 2);
    expect(first.allowed).toBe(true);
    expect((await decide([before], tracker)).allowed).toBe(false);
    const raised = await decide([after], tracker);
    const el = raised.nowMs - first.nowMs;
    if (algorithm === 'token-bucket') {
      // A token bucket stores the tokens left (none), not the burst they came from: it now refills at the
      // new rate 5/W (one unit every W/5, not W/2).
      expect(raised.verdicts[0]).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: ceilDiv(W - 5 * el, 5) });
    } else {
      // The others store what was used (gcra and leaky-bucket: what is owed), so a larger capacity is free.
      // Two units used of a limit that is now 5: allowed at once, two left.
      expect(raised.verdicts[0]).toMatchObject({ allowed: true, remaining: 2, retryAfterMs: 0 });
      if (algorithm === 'leaky-bucket') expect(raised.verdicts[0].delayMs).toBe(ceilDiv(2 * W - 5 * el, 5));
    }
  });

  test.each(BUCKETS)(
    '%s: window shortened from 1000 to 100 ms (rate ×10, burst 2): the queue drains at the new rate',
    async (algorithm) => {
      const tracker = freshTracker(`window-${algorithm}`);
      const before: RateLimitPolicy = { algorithm, limit: 2, window: 1000 };
      const after: RateLimitPolicy = { algorithm, limit: 2, window: 100 };
      const first = await decide([before], tracker, 'consume', 2);
      expect(first.allowed).toBe(true);
      const peek = await decide([after], tracker, 'peek');
      const el = peek.nowMs - first.nowMs;
      if (algorithm === 'gcra') {
        // GCRA keeps no last-update time: what was owed until the change is measured at the old rate
        // (2 units less el·2/1000), then rescaled to the new window and repaid at 2 per 100 ms.
        const owed = ceilDiv((2000 - 2 * el) * 100, 1000);
        expect(peek.verdicts[0]).toMatchObject({ allowed: false, retryAfterMs: ceilDiv(owed - 100, 2) });
        await untilServerMs(peek.nowMs + ceilDiv(owed - 100, 2));
        expect((await decide([after], tracker)).verdicts[0]).toMatchObject({ allowed: true, retryAfterMs: 0 });
        return;
      }
      // Two units owed, repaid at 2 per 100 ms since the last update: one unit is free 50 ms after the
      // first call (not 500 ms).
      if (el < 50) expect(peek.verdicts[0]).toMatchObject({ allowed: false, retryAfterMs: 50 - el });
      else expect(peek.verdicts[0]).toMatchObject({ allowed: true });
      await untilServerMs(first.nowMs + 50);
      const later = await decide([after], tracker);
      const el2 = later.nowMs - first.nowMs;
      expect(later.verdicts[0]).toMatchObject({
        allowed: true,
        remaining: Math.floor((Math.min(2 * el2, 200) - 100) / 100),
        retryAfterMs: 0,
      });
    },
  );

  test.each(BUCKETS)('%s: limit raised from 1 to 10 per 10 s with burst 1: the wait drops from 10 s to 1 s', async (algorithm) => {
    const tracker = freshTracker(`rate-${algorithm}`);
    const before: RateLimitPolicy = { algorithm, limit: 1, window: 10_000, burst: 1 };
    const after: RateLimitPolicy = { algorithm, limit: 10, window: 10_000, burst: 1 };
    const first = await decide([before], tracker);
    expect(first.allowed).toBe(true);
    const rejected = await decide([before], tracker);
    expect(rejected.verdicts[0].retryAfterMs).toBe(10_000 - (rejected.nowMs - first.nowMs));
    const raised = await decide([after], tracker, 'peek');
    const el = raised.nowMs - first.nowMs;
    // gcra repays what was owed until the change at the old rate (el ms of 1 per 10 s), then at the new one.
    const expected = algorithm === 'gcra' ? ceilDiv(10_000 - el, 10) : 1000 - el;
    expect(raised.verdicts[0]).toMatchObject({ allowed: false, retryAfterMs: expected });
  });
});

describe('5. time comes from Redis, not the app', () => {
  test('two app processes whose clocks are 10 minutes apart share one quota exactly', async () => {
    const W = 60_000;
    const env = {
      REDIS_PORT: String(redis.port),
      ALGORITHMS: ALGORITHMS.join(','),
      LIMIT: '10',
      WINDOW_MS: String(W),
      CALLS: '10',
      KEY: 'skewed',
    };
    const results = await runWorkers(
      [
        { ...env, DATE_OFFSET_MS: String(-5 * 60_000) },
        { ...env, DATE_OFFSET_MS: String(5 * 60_000) },
      ],
      {
        // Keep the burst of calls clear of an aligned window boundary (fixed and sliding window).
        beforeGo: async () => {
          const now = await serverMs();
          if (now % W > W - 2000) await untilServerMs(now - (now % W) + W + 10);
        },
      },
    );
    // The skew really was in effect in the workers.
    expect(Math.abs(results[1].now - results[0].now - 10 * 60_000)).toBeLessThan(5000);
    for (const algorithm of ALGORITHMS) {
      const total = results[0].allowed[algorithm] + results[1].allowed[algorithm];
      expect({ algorithm, total }).toEqual({ algorithm, total: 10 });
    }
    expect((await keysOf('skewed')).filter(({ pttl }) => !(pttl > 0 && pttl <= 2 * W))).toEqual([]);
  }, 60_000);
});

describe('6. service sanity on the same server', () => {
  test('reset restores the full quota and peek changes nothing', async () => {
    const policy: RateLimitPolicy = { algorithm: 'gcra', limit: 2, window: 60_000 };
    const key = freshTracker('svc');
    expect((await service.consume(policy, key)).remaining).toBe(1);
    expect((await service.peek(policy, key)).remaining).toBe(1);
    expect((await service.peek(policy, key)).remaining).toBe(1);
    expect((await service.consume(policy, key)).remaining).toBe(0);
    expect((await service.consume(policy, key)).allowed).toBe(false);
    await service.reset(policy, key);
    expect(await service.consume(policy, key)).toEqual({
      allowed: true,
      policy: 'default',
      limit: 2,
      remaining: 1,
      resetMs: 30_000,
      moreQuotaMs: 30_000,
      retryAfterMs: 0,
    });
  });
});

describe("7. a client's own keyPrefix", () => {
  test('every key lands under the prefix, for lone decisions, batched ones and reset alike', async () => {
    const prefixed = new Redis({ port: redis.port, keyPrefix: 'app7:', enableAutoPipelining: true });
    try {
      const own = new RateLimiterService(new RateLimitEngine(new RedisStore(prefixed, registry.all(), false)), registry, { prefix: 'rl' });
      const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 3, window: 60_000, blockFor: 60_000 };
      expect((await own.consume(policy, 'kp7-lone')).remaining).toBe(2);
      const batch = await Promise.all(Array.from({ length: 5 }, () => own.consume(policy, 'kp7-batched')));
      expect(batch.map((d) => d.allowed)).toEqual([true, true, true, false, false]);
      const keys = await admin.keys('*kp7-*');
      expect(keys.length).toBeGreaterThanOrEqual(3);
      expect(keys.filter((key) => !key.startsWith('app7:rl'))).toEqual([]);
      await own.reset(policy, 'kp7-batched');
      expect((await own.consume(policy, 'kp7-batched')).remaining).toBe(2);
    } finally {
      prefixed.disconnect();
    }
  });
});
