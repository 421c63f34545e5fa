/**
 * The seven algorithms' Lua scripts on a real redis-server, through RateLimiterService + RedisStore.
 *
 * Time is Redis's own (`TIME`), so tests use short windows and small sleeps, and assert counts that do not
 * depend on scheduling. Every number is still checked exactly: the store is wrapped in a recorder, and after
 * each test the recorded decisions are replayed on the MemoryStore twin at the server times Redis used; the
 * two must agree field for field. Every test runs once per client library (ioredis, node-redis, Valkey GLIDE) with the
 * same assertions; `redis` is an ioredis client of the test's own for inspecting the server.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { secondsUntilMore } from '../../lib/http/header-profiles';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RedisClient } from '../../lib/interfaces/client-types';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision } from '../../lib/stores/store.interface';
import { REDIS_CLIENTS } from '../support/redis-clients';
import { startRedis, type RedisProcess } from '../support/redis-server';

const PREFIX = 'x';
const L = 5;
const W = 400;
const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const TAG: Record<RateLimitAlgorithmName, string> = {
  'fixed-window': 'fw',
  'sliding-window': 's',
  'sliding-log': 'sl',
  'token-bucket': 't',
  gcra: 'g',
  'leaky-bucket': 'l',
  concurrency: 'cc',
};

type Operation =
  | { kind: 'decide'; calls: readonly RateLimitCall[]; mode: DecisionMode; result: StoreDecision }
  | { kind: 'delete'; keys: readonly string[] };

/** Passes everything to Redis and remembers each decision with the server time it was made at. */
class RecordingStore implements RateLimitStore {
  readonly log: Operation[] = [];
  constructor(private readonly inner: RedisStore) {}
  async decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    const result = await this.inner.decide(calls, mode);
    this.log.push({ kind: 'decide', calls, mode, result });
    return result;
  }
  async delete(keys: readonly string[]): Promise<void> {
    await this.inner.delete(keys);
    this.log.push({ kind: 'delete', keys });
  }
  refund(calls: readonly RateLimitCall[]): Promise<void> {
    return this.inner.refund(calls);
  }
  block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    return this.inner.block(calls, ms);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  /** Server time of the n-th decision from the end (1 = the last). */
  nowOf(fromEnd = 1): number {
    const decisions = this.log.filter((op) => op.kind === 'decide');
    return (decisions[decisions.length - fromEnd] as Extract<Operation, { kind: 'decide' }>).result.nowMs;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let server: RedisProcess;
let redis: Redis;
let recorder: RecordingStore;
let limiter: RateLimiterService;

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  await redis?.quit();
  await server?.stop();
});

beforeEach(async () => {
  await redis.flushall();
  recorder.log.length = 0;
});

afterEach(async () => {
  // Replay every decision of the test on the TypeScript twin at the server's times: same verdicts, exactly.
  let now = 0;
  const twin = new MemoryStore({ clock: () => now });
  for (const op of recorder.log) {
    if (op.kind === 'delete') {
      await twin.delete(op.keys);
      continue;
    }
    now = op.result.nowMs;
    expect(await twin.decide(op.calls, op.mode)).toStrictEqual(op.result);
  }
});

async function serverNow(): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** Waits, if needed, so that the next ~100 ms lie inside one aligned window of `window` ms. */
async function startOfWindow(window = W): Promise<void> {
  const into = (await serverNow()) % window;
  if (into > window / 4) await sleep(window - into + 2);
}

async function scanKeys(pattern = `${PREFIX}:*`): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys.sort();
}

/** Every key's type and content (not its TTL). */
async function snapshot(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of await scanKeys()) {
    const type = await redis.type(key);
    if (type === 'hash') out[key] = await redis.hgetall(key);
    else if (type === 'zset') out[key] = await redis.zrange(key, '0', '-1', 'WITHSCORES');
    else out[key] = [type, await redis.get(key)];
  }
  return out;
}

/** Redis Cluster's CRC16 (XMODEM). CLUSTER KEYSLOT is refused by a non-cluster server. */
function crc16(bytes: Buffer): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** The hash-tag substring Redis Cluster hashes: between the first `{` and the next `}`, if non-empty. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

const keySlot = (key: string) => crc16(Buffer.from(hashTag(key))) % 16384;

/**
 * Calls sent back to back without awaiting each other: one pipelined burst that Redis runs in order within
 * a millisecond or so, so no refill or window edge can slip in between. Results come back in that order.
 */
function burst<T>(n: number, call: (i: number) => Promise<T>): Promise<T[]> {
  return Promise.all(Array.from({ length: n }, (_, i) => call(i)));
}

describe.each(REDIS_CLIENTS)('$name', (kind) => {
  let client: RedisClient;

  beforeAll(async () => {
    client = await kind.connect(server.port);
    recorder = new RecordingStore(new RedisStore(client, new RateLimitAlgorithmRegistry().all(), false));
    limiter = new RateLimiterService(new RateLimitEngine(recorder), new RateLimitAlgorithmRegistry(), { prefix: PREFIX });
  });

  afterAll(async () => {
    await recorder.close();
    await kind.close(client);
  });

  describe.each(ALGORITHMS)('%s on Redis (limit 5 per 400 ms)', (algorithm) => {
    const policy: RateLimitPolicy = { algorithm, limit: L, window: W };
    /** Same limit over 10 s, for cases where time must not matter (one unit refills every 2 s at most). */
    const slow: RateLimitPolicy = { algorithm, limit: L, window: 10_000 };
    const consume = (key = 'alice', cost?: number, p = policy) => limiter.consume(p, key, cost === undefined ? {} : { cost });

    beforeEach(() => startOfWindow());

    it('limit−1 and limit are allowed, limit+1 is rejected, with exact remaining', async () => {
      const d = await burst(L + 1, () => consume());
      expect(d.map((x) => [x.allowed, x.remaining])).toStrictEqual([
        [true, 4],
        [true, 3],
        [true, 2],
        [true, 1],
        [true, 0],
        [false, 0],
      ]);
      expect(d[5].retryAfterMs).toBeGreaterThan(0);
      expect(d[5].retryAfterMs).toBeLessThanOrEqual(2 * W);
    });

    it('admits exactly limit of 30 concurrent calls on one key', async () => {
      const d = await burst(30, () => consume());
      expect(d.map((x) => x.allowed)).toStrictEqual([...Array(L).fill(true), ...Array(30 - L).fill(false)]);
    });

    it('a rejection charges nothing: retryAfterMs shrinks exactly with server time, and waiting it out lets the request through', async () => {
      const [first] = (await burst(L + 1, () => consume())).slice(L);
      const firstAt = recorder.nowOf();
      await sleep(10);
      const second = await consume();
      expect(second.allowed).toBe(false);
      expect(second.retryAfterMs).toBe(first.retryAfterMs - (recorder.nowOf() - firstAt));
      await sleep(second.retryAfterMs + 3);
      expect(await consume()).toMatchObject({ allowed: true, retryAfterMs: 0 });
    });

    it('the quota is full again once resetMs has passed (window rollover)', async () => {
      const last = (await burst(L, () => consume()))[L - 1];
      expect(last.remaining).toBe(0);
      await sleep(last.resetMs + 3);
      expect((await limiter.peek(policy, 'alice')).remaining).toBe(L);
      expect((await burst(L + 1, () => consume())).map((x) => x.remaining)).toStrictEqual([4, 3, 2, 1, 0, 0]);
    });

    it('cost > 1 takes that many units; cost > capacity is rejected as never possible and charges nothing', async () => {
      const d = await burst(4, (i) => consume('alice', [3, 3, L + 1, 2][i], slow));
      expect(d[0]).toMatchObject({ allowed: true, remaining: 2 });
      expect(d[1]).toMatchObject({ allowed: false, remaining: 2 });
      expect(d[2]).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: 'cost-exceeds-capacity' });
      expect(d[3]).toMatchObject({ allowed: true, remaining: 0 });
    });

    it('peek changes no key', async () => {
      expect(await limiter.peek(slow, 'alice')).toMatchObject({ allowed: true, remaining: L });
      expect(await scanKeys()).toStrictEqual([]);
      await burst(2, () => consume('alice', 1, slow));
      const before = await snapshot();
      for (const p of await burst(3, () => limiter.peek(slow, 'alice'))) expect(p).toMatchObject({ allowed: true, remaining: 3 });
      expect(await snapshot()).toStrictEqual(before);
      expect((await consume('alice', 1, slow)).remaining).toBe(2);
    });

    it('reset deletes the state and restores the full quota', async () => {
      expect((await burst(L + 1, () => consume('alice', 1, slow)))[L].allowed).toBe(false);
      await limiter.reset(slow, 'alice');
      expect(await scanKeys()).toStrictEqual([]);
      expect(await consume('alice', 1, slow)).toMatchObject({ allowed: true, remaining: 4 });
    });

    it('two trackers never interfere', async () => {
      await burst(L, () => consume('alice', 1, slow));
      expect((await burst(L, () => consume('bob', 1, slow))).map((x) => x.remaining)).toStrictEqual([4, 3, 2, 1, 0]);
      expect((await consume('alice', 1, slow)).allowed).toBe(false);
    });

    it('writes one key, <prefix>:{<tracker>}:svc:<name>:<tag>, with a TTL no longer than needed', async () => {
      await consume('alice');
      const [key, ...others] = await scanKeys();
      expect(others).toStrictEqual([]);
      expect(key).toBe(`${PREFIX}:{by%3Aalice}:svc:default:${TAG[algorithm]}`);
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(algorithm === 'sliding-window' ? 2 * W : W);
    });

    it('consumeAll: when another policy rejects, this one is not charged (mixed-algorithm script)', async () => {
      const mine: RateLimitPolicy = { ...slow, name: 'a' };
      const gate: RateLimitPolicy = {
        algorithm: algorithm === 'fixed-window' ? 'gcra' : 'fixed-window',
        limit: 1,
        window: 10_000,
        name: 'b',
      };
      expect((await limiter.consume(gate, 'alice')).allowed).toBe(true);
      const all = await limiter.consumeAll([mine, gate], 'alice');
      expect(all.allowed).toBe(false);
      expect(all.decisions.map((x) => [x.policy, x.allowed, x.remaining])).toStrictEqual([
        ['a', true, L],
        ['b', false, 0],
      ]);
      expect(await redis.exists(`${PREFIX}:{by%3Aalice}:svc:a:${TAG[algorithm]}`)).toBe(0);
      expect((await limiter.peek(mine, 'alice')).remaining).toBe(L);
    });
  });

  describe('Redis keys and TTLs', () => {
    it('consumeAll over all seven algorithms charges each one, and every key written (lockouts included) has a TTL', async () => {
      await startOfWindow();
      const policies: RateLimitPolicy[] = ALGORITHMS.map((algorithm) => ({
        algorithm,
        limit: 2,
        window: W,
        name: algorithm,
        blockFor: 300,
      }));
      const [first, , third] = await burst(3, () => limiter.consumeAll(policies, 'alice')); // the third locks out
      expect(first.allowed).toBe(true);
      expect(first.decisions.map((d) => [d.policy, d.remaining])).toStrictEqual(ALGORITHMS.map((a) => [a, 1]));
      expect(third.decisions.map((d) => [d.allowed, d.reason])).toStrictEqual(ALGORITHMS.map(() => [false, 'blocked']));

      const keys = await scanKeys();
      expect(keys).toStrictEqual(
        ALGORITHMS.flatMap((a) => [`${PREFIX}:{by%3Aalice}:svc:${a}:${TAG[a]}`, `${PREFIX}:{by%3Aalice}:svc:${a}:b`]).sort(),
      );
      for (const key of keys) {
        const ttl = await redis.pttl(key);
        const max = key.endsWith(':b') ? 300 : key.endsWith(':s') ? 2 * W : W;
        expect([key, ttl > 0 && ttl <= max]).toStrictEqual([key, true]);
      }
    });

    it('a tracker containing {, }, : and a newline works, and every key of its decision is in one hash slot', async () => {
      expect(crc16(Buffer.from('123456789'))).toBe(0x31c3); // the helper is Redis Cluster's CRC16
      expect(keySlot('foo')).toBe(12182);
      expect(keySlot('{user1000}.following')).toBe(keySlot('{user1000}.followers'));

      const tracker = 'a{b}:c\nd}';
      const policies: RateLimitPolicy[] = [
        { algorithm: 'gcra', limit: 2, window: 10_000, name: 'g', blockFor: 1_000 },
        { algorithm: 'sliding-log', limit: 3, window: 10_000, name: 's' },
      ];
      const d = (await burst(3, () => limiter.consumeAll(policies, tracker))).map((all) => all.decisions[0]);
      expect(d.map((x) => [x.allowed, x.remaining])).toStrictEqual([
        [true, 1],
        [true, 0],
        [false, 0],
      ]);
      expect((await limiter.consumeAll(policies, 'a')).allowed).toBe(true); // a prefix of the tracker: its own quota

      const decided = recorder.log.flatMap((op) => (op.kind === 'decide' ? [op.calls.flatMap((c) => [c.stateKey, c.blockKey])] : []));
      for (const keys of decided) {
        expect(new Set(keys.map(keySlot)).size).toBe(1);
        expect(new Set(keys.map(hashTag)).size).toBe(1);
      }
      const keys = await scanKeys(`${PREFIX}:{by%3Aa%7B*`); // a service key K is the tracker by:K
      expect(keys).toHaveLength(3); // gcra state, its lockout, the sliding log
      for (const key of keys) {
        expect(key.startsWith(`${PREFIX}:{`)).toBe(true);
        expect(hashTag(key)).toBe('by%3Aa%7Bb%7D%3Ac%0Ad%7D');
        expect(key).not.toMatch(/\n/);
      }
      expect(new Set(keys.map(keySlot)).size).toBe(1);
      expect(keySlot(`${PREFIX}:{by%3Aa}:svc:g:g`)).not.toBe(keySlot(keys[0]));
    });

    it('peek and reset leave no key behind', async () => {
      const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 2, window: 10_000, blockFor: 5_000 };
      await limiter.peek(policy, 'alice');
      expect(await scanKeys()).toStrictEqual([]);
      await burst(3, () => limiter.consume(policy, 'alice'));
      expect(await scanKeys()).toStrictEqual([`${PREFIX}:{by%3Aalice}:svc:default:b`, `${PREFIX}:{by%3Aalice}:svc:default:sl`]);
      expect(await limiter.peek(policy, 'alice')).toMatchObject({ allowed: false, reason: 'blocked' });
      await limiter.reset(policy, 'alice');
      expect(await scanKeys()).toStrictEqual([]);
      expect(await limiter.consume(policy, 'alice')).toMatchObject({ allowed: true, remaining: 1 });
    });
  });

  describe('algorithm specifics on Redis', () => {
    it('sliding-window: a full previous window weighs on the next one as prev·(W−e)/W + cur + 1 ≤ limit', async () => {
      const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 10, window: W };
      await startOfWindow();
      expect((await burst(10, () => limiter.consume(policy, 'k'))).every((d) => d.allowed)).toBe(true);
      const next = (Math.floor(recorder.nowOf() / W) + 1) * W; // start of the next window
      await sleep(next + W / 2 - (await serverNow())); // about half into it: the previous window weighs ≈ 5
      const d = await burst(8, () => limiter.consume(policy, 'k'));
      const at = recorder.log.slice(-8).map((op) => (op.kind === 'decide' ? op.result.nowMs : NaN));
      let cur = 0;
      const expected = at.map((now) => {
        const e = now - next;
        const ok = 10 * (W - e) + (cur + 1) * W <= 10 * W; // ALGORITHMS.md, multiplied by W
        if (ok) cur++;
        return ok;
      });
      expect(d.map((x) => x.allowed)).toStrictEqual(expected);
      expect(cur).toBeGreaterThanOrEqual(3);
      expect(cur).toBeLessThanOrEqual(7);
      const rejected = d[d.length - 1];
      expect(rejected.allowed).toBe(false);
      await sleep(rejected.retryAfterMs + 3);
      expect((await limiter.consume(policy, 'k')).allowed).toBe(true);
    });

    it('leaky-bucket: a burst of 10 per 400 ms is spaced 40 ms apart (less the time the bucket leaked meanwhile)', async () => {
      const d = await burst(11, () => limiter.consume({ algorithm: 'leaky-bucket', limit: 10, window: W }, 'k'));
      const at = recorder.log.slice(-11).map((op) => (op.kind === 'decide' ? op.result.nowMs : NaN));
      expect(d.map((x) => x.allowed)).toStrictEqual([...Array(10).fill(true), false]);
      expect(d.map((x) => x.delayMs)).toStrictEqual(d.map((_, i) => (i < 10 ? 40 * i - (at[i] - at[0]) : 0)));
    });

    it('concurrency: leases expire after the window', async () => {
      const policy: RateLimitPolicy = { algorithm: 'concurrency', limit: 2, window: 200 };
      expect((await limiter.consume(policy, 'k')).allowed).toBe(true);
      const firstAt = recorder.nowOf();
      await sleep(80);
      expect((await burst(2, () => limiter.consume(policy, 'k'))).map((d) => d.allowed)).toStrictEqual([true, false]);
      const { retryAfterMs } = await limiter.consume(policy, 'k');
      expect(retryAfterMs).toBe(firstAt + 200 - recorder.nowOf()); // when the first lease expires
      await sleep(retryAfterMs + 3);
      expect(await limiter.consume(policy, 'k')).toMatchObject({ allowed: true, remaining: 0 }); // second lease still live
      expect(await redis.zcard(`${PREFIX}:{by%3Ak}:svc:default:cc`)).toBe(2);
      const { retryAfterMs: untilSecond } = await limiter.consume(policy, 'k');
      await sleep(untilSecond + 3);
      expect(await limiter.consume(policy, 'k')).toMatchObject({ allowed: true, remaining: 0 });
    });
  });

  describe('moreQuotaMs on Redis: when remaining next grows (the RateLimit header t)', () => {
    /** The server times of the last `n` decisions, oldest first. */
    const times = (n: number) => Array.from({ length: n }, (_, i) => recorder.nowOf(n - i));

    it('sliding-log 5 per 10 s, hits spread out: t is when the oldest entry ages out, not the full reset', async () => {
      const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 5, window: 10_000 };
      await limiter.consume(policy, 'k');
      await sleep(30);
      await limiter.consume(policy, 'k');
      await sleep(30);
      const d = await limiter.consume(policy, 'k');
      const [first, , last] = times(3);
      expect(d).toMatchObject({ remaining: 2, resetMs: 10_000, moreQuotaMs: first + 10_000 - last });
      expect(d.moreQuotaMs).toBeLessThan(10_000 - 50);
      expect(secondsUntilMore(d)).toBe(Math.ceil((first + 10_000 - last) / 1000));
    });

    it.each(['token-bucket', 'gcra', 'leaky-bucket'] as const)(
      '%s 1/s burst 10 after 3 hits: r=7, t=1 (the next unit)',
      async (algorithm) => {
        const policy: RateLimitPolicy = { algorithm, limit: 1, window: 1000, burst: 10, delay: false };
        const d = await burst(3, () => limiter.consume(policy, 'k'));
        const [first, , last] = times(3);
        // 3 units taken, (last − first) ms of refill since: the next whole unit is (last − first) ms closer.
        expect(d[2]).toMatchObject({ allowed: true, remaining: 7, moreQuotaMs: 1000 - (last - first) });
        expect(secondsUntilMore(d[2])).toBe(1);
      },
    );

    it('fixed-window: the window end, on the rejection too', async () => {
      const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 2, window: W };
      await startOfWindow();
      const d = await burst(3, () => limiter.consume(policy, 'k'));
      times(3).forEach((now, i) => expect(d[i].moreQuotaMs).toBe((Math.floor(now / W) + 1) * W - now));
      expect(d[2]).toMatchObject({ allowed: false, moreQuotaMs: d[2].retryAfterMs });
    });

    it('sliding-window 5 per 400 ms, 5 hits in one window: t is when 5·(W−e)/W ≤ 4 in the next one (e ≥ 80 ms)', async () => {
      const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 5, window: W };
      await startOfWindow();
      const d = await burst(5, () => limiter.consume(policy, 'k'));
      const now = recorder.nowOf();
      expect(d[4]).toMatchObject({ remaining: 0, moreQuotaMs: (Math.floor(now / W) + 1) * W + 80 - now });
      expect(d[4].moreQuotaMs).toBeLessThan(d[4].resetMs);
      await sleep(d[4].moreQuotaMs + 3);
      expect((await limiter.peek(policy, 'k')).remaining).toBe(1);
    });

    it('concurrency: the soonest lease expiry; 0 when none is held', async () => {
      const policy: RateLimitPolicy = { algorithm: 'concurrency', limit: 3, window: 10_000 };
      expect(await limiter.peek(policy, 'k')).toMatchObject({ remaining: 3, moreQuotaMs: 0 });
      await limiter.consume(policy, 'k');
      await sleep(30);
      const d = await limiter.consume(policy, 'k');
      const [first, last] = times(2);
      expect(d).toMatchObject({ remaining: 1, resetMs: 10_000, moreQuotaMs: first + 10_000 - last });
    });

    it('concurrency: a renewal moves the renewed lease, so the soonest expiry becomes the other one', async () => {
      const policy: RateLimitPolicy = { algorithm: 'concurrency', limit: 2, window: 10_000 };
      const a = await limiter.lease(policy, 'k');
      await sleep(30);
      await limiter.lease(policy, 'k');
      const secondAt = recorder.nowOf();
      await sleep(30);
      expect(await a.extend()).toBe(true);
      // The renewal's own verdict (its moreQuotaMs measured by the commit, after the move) is replayed on the twin
      // in afterEach; the key now says the same.
      const renewal = recorder.log[recorder.log.length - 1];
      expect(renewal.kind === 'decide' && renewal.result.verdicts[0].moreQuotaMs).toBe(secondAt + 10_000 - recorder.nowOf());
      const d = await limiter.peek(policy, 'k');
      expect(d).toMatchObject({ remaining: 0, moreQuotaMs: secondAt + 10_000 - recorder.nowOf() });
    });

    it('a lockout: until it ends, both on the rejection that starts it and on the ones it rejects', async () => {
      const policy: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: 10_000, blockFor: 20_000 };
      const d = await burst(2, () => limiter.consume(policy, 'k'));
      expect(d[1]).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: 20_000, moreQuotaMs: 20_000 });
      const startedAt = recorder.nowOf();
      await sleep(20);
      const blocked = await limiter.consume(policy, 'k');
      expect(blocked).toMatchObject({ allowed: false, moreQuotaMs: startedAt + 20_000 - recorder.nowOf() });
      expect(blocked.moreQuotaMs).toBe(blocked.retryAfterMs);
    });
  });
});
