/**
 * Every algorithm's TypeScript twin, driven through the public RateLimiterService on the MemoryStore with a
 * fake clock, so every number (remaining, resetMs, retryAfterMs, delayMs) is asserted exactly.
 *
 * The shared table below uses limit 4 per 1000 ms and starts at T0 + 250 ms (a quarter into a fixed window).
 */
import { memoryHarness, T0 } from '../support/memory-harness';
import fc from 'fast-check';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitDecision } from '../../lib/interfaces/decision.interface';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { parseDuration } from '../../lib/policy/duration';

const L = 4;
const W = 1000;

async function times(n: number, call: () => Promise<RateLimitDecision>): Promise<RateLimitDecision[]> {
  const out: RateLimitDecision[] = [];
  for (let i = 0; i < n; i++) out.push(await call());
  return out;
}

interface AlgorithmCase {
  algorithm: RateLimitAlgorithmName;
  /** resetMs of the 1st…4th consume, all at T0 + 250. */
  resets: number[];
  /** moreQuotaMs (when `remaining` next grows) of the 1st…4th consume, and of the 5th (rejected). */
  mores: number[];
  rejectedMore: number;
  /** resetMs and retryAfterMs of the 5th (rejected) consume, same instant. */
  rejectedReset: number;
  retry: number;
  /** After `cost: 3` at T0 + 250, retryAfterMs of a rejected `cost: 2`. */
  costRetry: number;
  /** remaining a peek reports 1 ms before the last resetMs has passed. */
  almostFull: number;
  /** delayMs of the 1st…4th consume (leaky-bucket). */
  delays?: number[];
}

const CASES: AlgorithmCase[] = [
  // Window [T0, T0+1000): 750 ms left of it.
  {
    algorithm: 'fixed-window',
    resets: [750, 750, 750, 750],
    mores: [750, 750, 750, 750],
    rejectedMore: 750,
    rejectedReset: 750,
    retry: 750,
    costRetry: 750,
    almostFull: 0,
  },
  // Counts matter until the end of the next window (T0+2000). Retry: next window, 4·(1000−e) + 1000 ≤ 4000 ⇔ e ≥ 250.
  // Cost 3 then 2: 3·(1000−e) + 2000 ≤ 4000 ⇔ e ≥ 334 → T0+1334.
  // More after k hits (remaining 4−k): k·(1000−e) ≤ (k−1)·1000 in the next window ⇔ e ≥ 1000 − ⌊(k−1)·1000/k⌋:
  // e = 1000 (k = 1: only once the count is gone), 500, 334, 250.
  {
    algorithm: 'sliding-window',
    resets: [1750, 1750, 1750, 1750],
    mores: [1750, 1250, 1084, 1000],
    rejectedMore: 1000,
    rejectedReset: 1750,
    retry: 1000,
    costRetry: 1084,
    almostFull: 3,
  },
  // Every entry is at T0+250 and leaves the log at T0+1250.
  {
    algorithm: 'sliding-log',
    resets: [1000, 1000, 1000, 1000],
    mores: [1000, 1000, 1000, 1000],
    rejectedMore: 1000,
    rejectedReset: 1000,
    retry: 1000,
    costRetry: 1000,
    almostFull: 0,
  },
  // One unit refills every 250 ms.
  {
    algorithm: 'token-bucket',
    resets: [250, 500, 750, 1000],
    mores: [250, 250, 250, 250],
    rejectedMore: 250,
    rejectedReset: 1000,
    retry: 250,
    costRetry: 250,
    almostFull: 3,
  },
  {
    algorithm: 'gcra',
    resets: [250, 500, 750, 1000],
    mores: [250, 250, 250, 250],
    rejectedMore: 250,
    rejectedReset: 1000,
    retry: 250,
    costRetry: 250,
    almostFull: 3,
  },
  {
    algorithm: 'leaky-bucket',
    resets: [250, 500, 750, 1000],
    mores: [250, 250, 250, 250],
    rejectedMore: 250,
    rejectedReset: 1000,
    retry: 250,
    costRetry: 250,
    almostFull: 3,
    delays: [0, 250, 500, 750],
  },
  // Leases taken at T0+250 expire at T0+1250.
  {
    algorithm: 'concurrency',
    resets: [1000, 1000, 1000, 1000],
    mores: [1000, 1000, 1000, 1000],
    rejectedMore: 1000,
    rejectedReset: 1000,
    retry: 1000,
    costRetry: 1000,
    almostFull: 0,
  },
];

describe.each(CASES)('$algorithm (limit 4 per 1000 ms)', (c) => {
  const policy: RateLimitPolicy = { algorithm: c.algorithm, limit: L, window: W };
  const leaky = c.algorithm === 'leaky-bucket';
  let h: ReturnType<typeof memoryHarness>;
  const consume = (key = 'alice', cost?: number) => h.limiter.consume(policy, key, cost === undefined ? {} : { cost });
  const peek = (key = 'alice') => h.limiter.peek(policy, key);
  const exhaust = (key = 'alice') => times(L, () => consume(key));

  beforeEach(() => {
    h = memoryHarness();
    h.at(T0 + 250);
  });

  const allowed = (remaining: number, resetMs: number, moreQuotaMs: number, delayMs?: number): RateLimitDecision => ({
    allowed: true,
    policy: 'default',
    limit: L,
    remaining,
    resetMs,
    moreQuotaMs,
    retryAfterMs: 0,
    ...(leaky ? { delayMs } : {}),
  });
  const rejected = (remaining: number, resetMs: number, retryAfterMs: number, moreQuotaMs: number): RateLimitDecision => ({
    allowed: false,
    policy: 'default',
    limit: L,
    remaining,
    resetMs,
    moreQuotaMs,
    retryAfterMs,
    ...(leaky ? { delayMs: 0 } : {}),
  });

  it('limit−1 and limit are allowed with exact remaining/resetMs; limit+1 is rejected with exact retryAfterMs', async () => {
    const decisions = await times(L + 1, () => consume());
    expect(decisions).toStrictEqual([
      allowed(3, c.resets[0], c.mores[0], c.delays?.[0]),
      allowed(2, c.resets[1], c.mores[1], c.delays?.[1]),
      allowed(1, c.resets[2], c.mores[2], c.delays?.[2]),
      allowed(0, c.resets[3], c.mores[3], c.delays?.[3]),
      rejected(0, c.rejectedReset, c.retry, c.rejectedMore),
    ]);
  });

  it('admits exactly limit of many simultaneous calls', async () => {
    const decisions = await Promise.all(Array.from({ length: 20 }, () => consume()));
    expect(decisions.map((d) => d.allowed)).toStrictEqual([...Array(L).fill(true), ...Array(20 - L).fill(false)]);
  });

  it('retryAfterMs is exact: 1 ms earlier is still rejected, at retryAfterMs it passes', async () => {
    await exhaust();
    const { retryAfterMs } = await consume();
    expect(retryAfterMs).toBe(c.retry);
    h.advance(retryAfterMs - 1);
    expect(await consume()).toMatchObject({ allowed: false, retryAfterMs: 1 });
    h.advance(1);
    expect(await consume()).toMatchObject({ allowed: true, retryAfterMs: 0 });
  });

  it('resetMs is exact: 1 ms earlier the quota is not full, at resetMs it is (window rollover)', async () => {
    const last = (await exhaust())[L - 1];
    h.advance(last.resetMs - 1);
    expect((await peek()).remaining).toBe(c.almostFull);
    h.advance(1);
    expect((await peek()).remaining).toBe(L);
    expect((await exhaust()).map((d) => d.remaining)).toStrictEqual([3, 2, 1, 0]);
    expect((await consume()).allowed).toBe(false);
  });

  it('rejected calls never charge: retryAfterMs shrinks exactly with time, however many rejections', async () => {
    await exhaust();
    const first = await consume();
    for (const elapsed of [0, Math.floor(c.retry / 4), Math.floor(c.retry / 2), c.retry - 1]) {
      h.at(T0 + 250 + elapsed);
      for (let i = 0; i < 5; i++)
        expect(await consume()).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: first.retryAfterMs - elapsed });
    }
    h.at(T0 + 250 + first.retryAfterMs);
    expect((await consume()).allowed).toBe(true);
  });

  it('cost > 1 takes that many units, and its retryAfterMs is exact', async () => {
    expect(await consume('alice', 3)).toMatchObject({ allowed: true, remaining: 1 });
    const r = await consume('alice', 2);
    expect(r).toMatchObject({ allowed: false, remaining: 1, retryAfterMs: c.costRetry });
    expect(r.reason).toBeUndefined();
    h.advance(c.costRetry - 1);
    expect(await consume('alice', 2)).toMatchObject({ allowed: false, retryAfterMs: 1 });
    h.advance(1);
    expect(await consume('alice', 2)).toMatchObject({ allowed: true, retryAfterMs: 0 });
  });

  it('cost > capacity is rejected as never possible, and charges nothing', async () => {
    const r = await consume('alice', L + 1);
    expect(r).toMatchObject({ allowed: false, remaining: L, retryAfterMs: Infinity, reason: 'cost-exceeds-capacity' });
    expect(h.store.size).toBe(0);
    expect(await consume('alice', L)).toMatchObject({ allowed: true, remaining: 0 });
    // Still "never", not "later", once the quota is used up.
    expect(await consume('alice', L + 1)).toMatchObject({ allowed: false, retryAfterMs: Infinity, reason: 'cost-exceeds-capacity' });
  });

  it('peek changes nothing, on a fresh, a partly used and an exhausted key', async () => {
    expect(await peek()).toMatchObject({ allowed: true, remaining: L, retryAfterMs: 0 });
    expect(h.store.size).toBe(0);
    await consume();
    await consume();
    const peeks = await times(3, () => peek());
    for (const p of peeks) expect(p).toMatchObject({ allowed: true, remaining: 2, retryAfterMs: 0 });
    expect((await consume()).remaining).toBe(1);
    expect((await consume()).remaining).toBe(0);
    expect(await peek()).toStrictEqual(rejected(0, c.rejectedReset, c.retry, c.rejectedMore));
    expect(await peek()).toStrictEqual(rejected(0, c.rejectedReset, c.retry, c.rejectedMore));
    expect(await consume()).toStrictEqual(rejected(0, c.rejectedReset, c.retry, c.rejectedMore));
  });

  it('reset restores the full quota', async () => {
    await exhaust();
    expect((await consume()).allowed).toBe(false);
    await h.limiter.reset(policy, 'alice');
    expect(h.store.size).toBe(0);
    expect(await consume()).toStrictEqual(allowed(3, c.resets[0], c.mores[0], c.delays?.[0]));
  });

  it('two keys (and two policy names on one key) never interfere', async () => {
    await exhaust('alice');
    expect((await exhaust('bob')).map((d) => d.remaining)).toStrictEqual([3, 2, 1, 0]);
    const other: RateLimitPolicy = { ...policy, name: 'other' };
    expect((await times(L, () => h.limiter.consume(other, 'alice'))).map((d) => [d.policy, d.remaining])).toStrictEqual([
      ['other', 3],
      ['other', 2],
      ['other', 1],
      ['other', 0],
    ]);
    expect(await consume('alice')).toMatchObject({ allowed: false, retryAfterMs: c.retry });
    expect(await consume('bob')).toMatchObject({ allowed: false, retryAfterMs: c.retry });
    expect((await consume('carol')).remaining).toBe(3);
  });

  it('consumeAll: when another policy rejects, this one is not charged', async () => {
    const mine: RateLimitPolicy = { ...policy, name: 'a' };
    const gate: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1, window: W, name: 'b' };
    expect((await h.limiter.consume(gate, 'alice')).allowed).toBe(true);
    const all = await h.limiter.consumeAll([mine, gate], 'alice');
    expect(all.allowed).toBe(false);
    expect(all.decisions.map((d) => [d.policy, d.allowed, d.remaining, d.retryAfterMs])).toStrictEqual([
      ['a', true, L, 0],
      ['b', false, 0, 750],
    ]);
    expect((await h.limiter.peek(mine, 'alice')).remaining).toBe(L);
    expect(h.store.size).toBe(1); // only the gate's counter exists
    h.at(T0 + W); // the gate's window rolls over; nothing of `mine` has been charged
    const ok = await h.limiter.consumeAll([mine, gate], 'alice');
    expect(ok.allowed).toBe(true);
    expect(ok.decisions.map((d) => [d.policy, d.allowed, d.remaining])).toStrictEqual([
      ['a', true, 3],
      ['b', true, 0],
    ]);
  });
});

describe('bucket capacity (burst)', () => {
  it.each(['token-bucket', 'gcra', 'leaky-bucket'] as const)(
    '%s: burst 6 with limit 4 admits 6 at once and refills at 4 per 1000 ms',
    async (algorithm) => {
      const h = memoryHarness();
      const policy: RateLimitPolicy = { algorithm, limit: L, window: W, burst: 6, delay: false };
      const burst = await times(7, () => h.limiter.consume(policy, 'k'));
      expect(burst.map((d) => [d.allowed, d.limit, d.remaining, d.resetMs])).toStrictEqual([
        [true, 6, 5, 250],
        [true, 6, 4, 500],
        [true, 6, 3, 750],
        [true, 6, 2, 1000],
        [true, 6, 1, 1250],
        [true, 6, 0, 1500],
        [false, 6, 0, 1500],
      ]);
      expect(burst[6].retryAfterMs).toBe(250);
      expect(burst.every((d) => d.delayMs === undefined)).toBe(true);
      expect(await h.limiter.consume(policy, 'k', { cost: 7 })).toMatchObject({
        allowed: false,
        retryAfterMs: Infinity,
        reason: 'cost-exceeds-capacity',
      });
    },
  );

  it.each(['fixed-window', 'sliding-window', 'sliding-log', 'concurrency'] as const)(
    '%s: capacity is the limit, burst does not apply',
    async (algorithm) => {
      const h = memoryHarness();
      const policy: RateLimitPolicy = { algorithm, limit: L, window: W, burst: 6 };
      const d = await h.limiter.consume(policy, 'k', { cost: 5 });
      expect(d).toMatchObject({ allowed: false, limit: L, retryAfterMs: Infinity, reason: 'cost-exceeds-capacity' });
    },
  );

  it('gcra decides exactly as token-bucket with the same limit, window and burst (random call sequences)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.integer({ min: 0, max: 10 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 700 }), fc.integer({ min: 0, max: 12 })), { maxLength: 40 }),
        async (limit, window, extra, steps) => {
          const h = memoryHarness();
          const tb: RateLimitPolicy = { algorithm: 'token-bucket', limit, window, burst: limit + extra };
          const gc: RateLimitPolicy = { algorithm: 'gcra', limit, window, burst: limit + extra };
          for (const [dt, cost] of steps) {
            h.advance(dt);
            const a = await h.limiter.consume(tb, 'k', { cost });
            const b = await h.limiter.consume(gc, 'k', { cost });
            expect(b).toStrictEqual(a);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('fixed-window and sliding-window at a window boundary', () => {
  it('fixed-window allows up to 2×limit across a boundary (the known trade-off), resetting exactly at it', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: L, window: W };
    h.at(T0 + 999);
    expect((await times(5, () => h.limiter.consume(policy, 'k'))).map((d) => [d.allowed, d.resetMs, d.retryAfterMs])).toStrictEqual([
      [true, 1, 0],
      [true, 1, 0],
      [true, 1, 0],
      [true, 1, 0],
      [false, 1, 1],
    ]);
    h.at(T0 + 1000);
    expect((await times(5, () => h.limiter.consume(policy, 'k'))).map((d) => [d.allowed, d.remaining, d.resetMs])).toStrictEqual([
      [true, 3, 1000],
      [true, 2, 1000],
      [true, 1, 1000],
      [true, 0, 1000],
      [false, 0, 1000],
    ]);
  });

  it('sliding-window: the previous window still weighs at the boundary', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: L, window: W };
    h.at(T0 + 999);
    await times(L, () => h.limiter.consume(policy, 'k'));
    h.at(T0 + 1000);
    // prev 4 · (1000 − e) + 1000 ≤ 4000 ⇔ e ≥ 250
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 250 });
  });
});

describe('sliding-window worst case (limit 10 per 1000 ms)', () => {
  const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 10, window: W };

  it('admits 19 = 2L − 1 within 999 ms: 10 at the end of one window, 9 just before the end of the next', async () => {
    const h = memoryHarness();
    h.at(T0 + 999);
    expect((await times(10, () => h.limiter.consume(policy, 'k'))).every((d) => d.allowed)).toBe(true);
    // prev 10 · (1000 − 998) + (cur + 1) · 1000 ≤ 10000 ⇔ cur ≤ 8.98: 9 more fit.
    h.at(T0 + 1998);
    expect((await times(10, () => h.limiter.consume(policy, 'k'))).map((d) => d.allowed)).toStrictEqual([
      ...Array<boolean>(9).fill(true),
      false,
    ]);
  });

  it('never admits 2L in any span of one window, whatever the arrival times (unit costs)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 4_999 }), { minLength: 1, maxLength: 120 }), async (offsets) => {
        const h = memoryHarness();
        const admitted: number[] = [];
        for (const at of [...offsets].sort((a, b) => a - b)) {
          h.at(T0 + at);
          if ((await h.limiter.consume(policy, 'k')).allowed) admitted.push(at);
        }
        let most = 0;
        for (let i = 0, j = 0; i < admitted.length; i++) {
          while (admitted[i] - admitted[j] >= W) j++;
          most = Math.max(most, i - j + 1);
        }
        expect(most).toBeLessThanOrEqual(19);
      }),
      { numRuns: 200 },
    );
  });
});

describe('sliding-window weighted estimate (limit 10 per 1000 ms, previous window full)', () => {
  const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 10, window: W };

  async function withFullPreviousWindow() {
    const h = memoryHarness();
    h.at(T0);
    expect((await times(10, () => h.limiter.consume(policy, 'k'))).every((d) => d.allowed)).toBe(true);
    return h;
  }

  it('75% into the current window the previous one weighs 2.5: 7 allowed, then retry exactly when it weighs 2', async () => {
    const h = await withFullPreviousWindow();
    h.at(T0 + 1750);
    const d = await times(8, () => h.limiter.consume(policy, 'k'));
    expect(d.map((x) => [x.allowed, x.remaining])).toStrictEqual([
      [true, 6],
      [true, 5],
      [true, 4],
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
    ]);
    // 10 · (1000 − e) + 8000 ≤ 10000 ⇔ e ≥ 800
    expect(d[7]).toMatchObject({ retryAfterMs: 50, resetMs: 1250 });
    h.at(T0 + 1799);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    h.at(T0 + 1800);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('25% into the current window the previous one weighs 7.5: 2 allowed, retry exactly when it weighs 7', async () => {
    const h = await withFullPreviousWindow();
    h.at(T0 + 1250);
    const d = await times(3, () => h.limiter.consume(policy, 'k'));
    expect(d.map((x) => [x.allowed, x.remaining, x.retryAfterMs])).toStrictEqual([
      [true, 1, 0],
      [true, 0, 0],
      [false, 0, 50],
    ]);
    h.at(T0 + 1299);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    h.at(T0 + 1300);
    expect((await h.limiter.consume(policy, 'k')).allowed).toBe(true);
  });
});

describe('leaky-bucket shaping', () => {
  it('a burst of limit 10 per 1000 ms gets delays 0, 100, …, 900; the 11th is rejected until a slot drains', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'leaky-bucket', limit: 10, window: W };
    const d = await times(11, () => h.limiter.consume(policy, 'k'));
    expect(d.map((x) => x.delayMs)).toStrictEqual([0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 0]);
    expect(d[10]).toMatchObject({ allowed: false, retryAfterMs: 100 });
    h.advance(50);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: false, retryAfterMs: 50, delayMs: 0 });
    h.advance(50);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: true, delayMs: 900, remaining: 0 });
  });

  it('delay: false makes it a pure meter (no delayMs); other algorithms never report delayMs', async () => {
    const h = memoryHarness();
    const meter = await h.limiter.consume({ algorithm: 'leaky-bucket', limit: 10, window: W, delay: false }, 'k');
    expect(meter).toStrictEqual({
      allowed: true,
      policy: 'default',
      limit: 10,
      remaining: 9,
      resetMs: 100,
      moreQuotaMs: 100,
      retryAfterMs: 0,
    });
    const fw = await h.limiter.consume({ algorithm: 'fixed-window', limit: 10, window: W }, 'k');
    expect('delayMs' in fw).toBe(false);
  });
});

describe('concurrency leases', () => {
  it('a lease expires after the window; retryAfterMs points at the oldest live lease', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'concurrency', limit: 2, window: W };
    const take = () => h.limiter.consume(policy, 'k');
    h.at(T0);
    expect(await take()).toMatchObject({ allowed: true, remaining: 1, resetMs: 1000 }); // lease A until T0+1000
    h.at(T0 + 300);
    expect(await take()).toMatchObject({ allowed: true, remaining: 0, resetMs: 1000 }); // lease B until T0+1300
    h.at(T0 + 500);
    expect(await take()).toMatchObject({ allowed: false, remaining: 0, resetMs: 800, retryAfterMs: 500 });
    h.at(T0 + 999);
    expect(await take()).toMatchObject({ allowed: false, retryAfterMs: 1 });
    h.at(T0 + 1000);
    expect(await take()).toMatchObject({ allowed: true, remaining: 0, resetMs: 1000 }); // A expired; C until T0+2000
    h.at(T0 + 1300);
    expect(await take()).toMatchObject({ allowed: true, remaining: 0 }); // B expired; D until T0+2300
    expect(await take()).toMatchObject({ allowed: false, retryAfterMs: 700 });
  });
});

describe('bad input fails before any store call', () => {
  function spyStore() {
    const calls: string[] = [];
    const store: RateLimitStore = {
      decide: async () => {
        calls.push('decide');
        return { nowMs: 0, allowed: true, verdicts: [] };
      },
      refund: async () => {
        calls.push('refund');
      },
      block: async () => {
        calls.push('block');
      },
      delete: async () => {
        calls.push('delete');
      },
      close: async () => {
        calls.push('close');
      },
    };
    const limiter = new RateLimiterService(new RateLimitEngine(store), new RateLimitAlgorithmRegistry(), { prefix: 'x' });
    return { calls, limiter };
  }
  const bad = (fields: Record<string, unknown>): RateLimitPolicy =>
    ({ algorithm: 'fixed-window', limit: 10, window: 1000, ...fields }) as RateLimitPolicy;

  const POLICIES: Array<[string, RateLimitPolicy, RegExp]> = [
    [
      'unknown algorithm',
      bad({ algorithm: 'leaky-window' }),
      /algorithm: "leaky-window" is not a known algorithm; use one of 'fixed-window'/,
    ],
    ['limit 0', bad({ limit: 0 }), /limit: 0 must be a whole number ≥ 1/],
    ['limit -1', bad({ limit: -1 }), /limit: -1 must be a whole number ≥ 1/],
    ['limit 1.5', bad({ limit: 1.5 }), /limit: 1\.5 must be a whole number ≥ 1/],
    ["window 'abc'", bad({ window: 'abc' }), /window: "abc" is not a valid duration/],
    ['window 0', bad({ window: 0 }), /window: 0 is not a valid duration/],
    ['policy cost -1', bad({ cost: -1 }), /cost: -1 must be a whole number of units ≥ 0/],
    ['policy cost 1.5', bad({ cost: 1.5 }), /cost: 1\.5 must be a whole number of units ≥ 0/],
  ];

  it.each(POLICIES)(
    '%s: consume, peek, consumeAll and reset throw RateLimitConfigError naming field and value',
    async (_label, policy, message) => {
      const { calls, limiter } = spyStore();
      for (const attempt of [
        () => limiter.consume(policy, 'k'),
        () => limiter.peek(policy, 'k'),
        () => limiter.consumeAll([policy], 'k'),
        () => limiter.reset(policy, 'k'),
      ]) {
        const error = await attempt().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(RateLimitConfigError);
        expect((error as Error).message).toMatch(message);
      }
      expect(calls).toStrictEqual([]);
    },
  );

  it.each([
    [-1, /cost: -1 must be a whole number of units ≥ 0/],
    [1.5, /cost: 1\.5 must be a whole number of units ≥ 0/],
    [Number.NaN, /cost: .* must be a whole number of units ≥ 0/],
  ])('call option cost %p is rejected without a store call', async (cost, message) => {
    const { calls, limiter } = spyStore();
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 10, window: 1000 };
    await expect(limiter.consume(policy, 'k', { cost })).rejects.toThrow(message);
    await expect(limiter.consume(policy, 'k', { cost })).rejects.toBeInstanceOf(RateLimitConfigError);
    expect(calls).toStrictEqual([]);
  });

  it('an empty key is rejected without a store call', async () => {
    const { calls, limiter } = spyStore();
    await expect(limiter.consume({ algorithm: 'gcra', limit: 1, window: 1000 }, '')).rejects.toThrow(/key: "" must be a non-empty string/);
    expect(calls).toStrictEqual([]);
  });

  it('the spy store does record calls (so the checks above can fail)', async () => {
    const { calls, limiter } = spyStore();
    await limiter.reset({ algorithm: 'gcra', limit: 1, window: 1000 }, 'k');
    expect(calls).toStrictEqual(['delete']);
  });
});

describe('durations', () => {
  it.each([
    ['250ms', 250],
    ['1s', 1_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
    ['1.5s', 1_500],
    ['15m', 900_000],
    [1, 1],
    [1234, 1234],
  ] as const)('%p is %p ms', (value, ms) => {
    expect(parseDuration(value, 'window')).toBe(ms);
  });

  it.each(['abc', '', '1w', '-1s', '1.5ms', 0, -5, 1.5])('%p is rejected, naming the field and the value', (value) => {
    const call = () => parseDuration(value as never, 'policy.window');
    expect(call).toThrow(RateLimitConfigError);
    expect(call).toThrow(`policy.window: ${JSON.stringify(value)} is not a valid duration`);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY])('%p is rejected', (value) => {
    expect(() => parseDuration(value, 'policy.window')).toThrow(/^policy\.window: .* is not a valid duration/);
  });

  it.each([Number.NaN, Number.POSITIVE_INFINITY])('the message names %p as such, not as null', (value) => {
    expect(() => parseDuration(value, 'policy.window')).toThrow(`policy.window: ${String(value)} is not a valid duration`);
  });

  it.each([
    ['250ms', 250],
    ['1s', 1_000],
    ['1m', 60_000],
    ['1h', 3_600_000],
    ['1d', 86_400_000],
  ] as const)("a policy window of '%s' is a %p ms window", async (window, ms) => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 1, window };
    expect((await h.limiter.consume(policy, 'k')).resetMs).toBe(ms);
    h.advance(ms - 1);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    h.advance(1);
    expect((await h.limiter.consume(policy, 'k')).allowed).toBe(true);
  });
});

/* A decision that charged nothing (`peek`, or a policy of a rejected `consumeAll`) reports the quota as it stands. */
describe('resetMs of decisions that charged nothing', () => {
  it.each(CASES.map((c) => c.algorithm))('%s: peek on an untouched key reports resetMs 0', async (algorithm) => {
    const h = memoryHarness();
    h.at(T0 + 250);
    expect(await h.limiter.peek({ algorithm, limit: L, window: W }, 'k')).toMatchObject({ remaining: L, resetMs: 0 });
  });
});
