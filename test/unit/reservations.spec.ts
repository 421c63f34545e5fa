/**
 * Reserve, then settle, on the memory store with a fake clock: every counting algorithm gives back or charges
 * exactly `estimate − actual`, lets an overdraft (clamped to the capacity) take the quota below zero with an
 * exact wait, and never makes quota in a window the estimate was not counted in.
 */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { memoryHarness } from '../support/memory-harness';

const W = 10_000;
const policy = (algorithm: RateLimitAlgorithmName): RateLimitPolicy => ({ algorithm, limit: 10, window: W, name: 'p' });

/**
 * Whole units charged → ms until one more unit fits, right after the charges at T0 (a window's start): the
 * window's end; sliding-window, when the 12 (11) units weigh ≤ 9 in the next window; sliding-log, when the
 * entries beyond 9 age out; buckets, when 3 (2) units have refilled at one per second.
 */
const WAIT_AFTER: Record<string, Record<number, number>> = {
  'fixed-window': { 12: W, 11: W },
  'sliding-window': { 12: W + 2_500, 11: W + 1_819 },
  'sliding-log': { 12: W, 11: W },
  'token-bucket': { 12: 3_000, 11: 2_000 },
  gcra: { 12: 3_000, 11: 2_000 },
  'leaky-bucket': { 12: 3_000, 11: 2_000 },
};
const COUNTING = Object.keys(WAIT_AFTER) as RateLimitAlgorithmName[];

describe.each(COUNTING)('reserve and settle on the memory store: %s', (algorithm) => {
  const p = policy(algorithm);

  it('gives back the difference when the actual cost is lower', async () => {
    const { limiter } = memoryHarness();
    const r = await limiter.reserve(p, 'k', { cost: 6 });
    expect(r).toMatchObject({ allowed: true, decision: { allowed: true, remaining: 4 } });
    await r.settle(2);
    expect((await limiter.peek(p, 'k')).remaining).toBe(8);
  });

  it('charges an overdraft past the limit; the next request waits exactly until it fits', async () => {
    const { limiter, advance } = memoryHarness();
    await (await limiter.reserve(p, 'k', { cost: 2 })).settle(2);
    const r = await limiter.reserve(p, 'k', { cost: 4 });
    expect(r.decision.remaining).toBe(4);
    await r.settle(10); // 2 + 10 = 12 units on a limit of 10
    const wait = WAIT_AFTER[algorithm][12];
    // `t` (moreQuotaMs) is when `remaining` leaves 0: for one unit, the same wait.
    expect(await limiter.peek(p, 'k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: wait, moreQuotaMs: wait });
    expect(await limiter.consume(p, 'k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: wait });
    advance(wait - 1);
    expect((await limiter.peek(p, 'k')).allowed).toBe(false);
    advance(1);
    // The windows let all 12 go at once; the sliding window and the buckets free just the one unit.
    const remaining = algorithm === 'fixed-window' || algorithm === 'sliding-log' ? 9 : 0;
    expect(await limiter.consume(p, 'k')).toMatchObject({ allowed: true, remaining });
  });

  it('clamps one overdraft to the capacity', async () => {
    const { limiter, store } = memoryHarness();
    await (await limiter.reserve(p, 'k', { cost: 1 })).settle(1_000_000);
    // 1 + 10 (not 1,000,000) units: the wait says so, and the state (a fixed window's count, the log's entries)
    expect(await limiter.peek(p, 'k')).toMatchObject({ allowed: false, retryAfterMs: WAIT_AFTER[algorithm][11] });
    const [[, value]] = [...(store as unknown as { keyspace: { entries: Iterable<[string, unknown]> } }).keyspace.entries];
    if (algorithm === 'sliding-log') expect((value as number[]).length).toBe(11);
    if (algorithm === 'fixed-window') expect(value).toMatchObject({ n: 11 });
  });

  it('cancel gives the whole estimate back', async () => {
    const { limiter } = memoryHarness();
    await limiter.consume(p, 'k', { cost: 3 });
    const r = await limiter.reserve(p, 'k', { cost: 7 });
    expect(r.decision.remaining).toBe(0);
    await r.cancel();
    expect((await limiter.peek(p, 'k')).remaining).toBe(7);
  });

  it('a give-back never fills the quota past full', async () => {
    const { limiter, advance } = memoryHarness();
    const r = await limiter.reserve(p, 'k', { cost: 6 });
    advance(3 * W);
    await limiter.consume(p, 'k', { cost: 1 });
    await r.settle(0);
    expect((await limiter.peek(p, 'k')).remaining).toBe(
      algorithm === 'token-bucket' || algorithm === 'gcra' || algorithm === 'leaky-bucket' ? 10 : 9,
    );
  });
});

describe('sliding-log memory under overdrafts', () => {
  it('holds at most twice the limit, however many reservations overdraw at once', async () => {
    const { limiter, store } = memoryHarness();
    const p = policy('sliding-log');
    const reservations = await Promise.all([1, 2, 3, 4, 5].map(() => limiter.reserve(p, 'k', { cost: 1 })));
    for (const r of reservations) await r.settle(1_000);
    const [[, value]] = [...(store as unknown as { keyspace: { entries: Iterable<[string, unknown]> } }).keyspace.entries];
    // 5 + 5 × 10 units overdrawn, of which 20 entries are kept.
    expect((value as number[]).length).toBe(20);
    expect(await limiter.peek(p, 'k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: W });
  });
});

describe('a settlement after the window rolled over', () => {
  it('fixed-window: units of an ended window are not given back to the new one', async () => {
    const { limiter, advance } = memoryHarness();
    const p = policy('fixed-window');
    const r = await limiter.reserve(p, 'k', { cost: 6 });
    advance(W);
    await limiter.consume(p, 'k', { cost: 3 });
    await r.settle(0);
    expect((await limiter.peek(p, 'k')).remaining).toBe(7);
  });

  it('sliding-window: given back from the previous window while it weighs, and not at all after', async () => {
    const { limiter, advance } = memoryHarness();
    const p = policy('sliding-window');
    const r = await limiter.reserve(p, 'k', { cost: 6 });
    advance(W + W / 2); // the 6 weigh 3 halfway into the next window
    await limiter.consume(p, 'k', { cost: 1 });
    expect((await limiter.peek(p, 'k')).remaining).toBe(6);
    await r.settle(0);
    // The 6 weigh nothing now, the 1 of this window stays; taken from this window's count, 7 would be left.
    expect((await limiter.peek(p, 'k')).remaining).toBe(9);

    const late = await limiter.reserve(p, 'j', { cost: 6 });
    advance(2 * W);
    await limiter.consume(p, 'j', { cost: 3 });
    await late.settle(0);
    expect((await limiter.peek(p, 'j')).remaining).toBe(7);
  });

  it('sliding-log: removes the reservation’s own entries, never later ones, none once they aged out', async () => {
    const { limiter, advance } = memoryHarness();
    const p = policy('sliding-log');
    const r = await limiter.reserve(p, 'k', { cost: 6 });
    advance(W / 2);
    await limiter.consume(p, 'k', { cost: 3 });
    await r.settle(2);
    expect((await limiter.peek(p, 'k')).remaining).toBe(5);
    advance(W / 2); // the reservation's 2 entries age out; the 3 later ones stay
    expect((await limiter.peek(p, 'k')).remaining).toBe(7);

    const aged = await limiter.reserve(p, 'j', { cost: 6 });
    advance(W);
    await limiter.consume(p, 'j', { cost: 3 });
    await aged.settle(0);
    expect((await limiter.peek(p, 'j')).remaining).toBe(7);
  });
});

describe('reservations through the service', () => {
  const perMinute: RateLimitPolicy = { name: 'minute', algorithm: 'sliding-window', limit: 2_000, window: '1m' };
  const perDay: RateLimitPolicy = { name: 'day', algorithm: 'fixed-window', limit: 50_000, window: '1d' };

  it('reserves every policy at once and settles each by the same actual cost', async () => {
    const { limiter } = memoryHarness();
    const r = await limiter.reserve([perMinute, perDay], 'key', { cost: 1_500 });
    expect(r.decisions.map((d) => d.remaining)).toEqual([500, 48_500]);
    expect(r.decision).toBe(r.decisions[0]);
    await r.settle(320);
    expect((await limiter.peek(perMinute, 'key')).remaining).toBe(1_680);
    expect((await limiter.peek(perDay, 'key')).remaining).toBe(49_680);
  });

  it('a rejected reservation charges nothing, and its settle does nothing', async () => {
    const { limiter } = memoryHarness();
    await limiter.consume(perMinute, 'key', { cost: 1_900 });
    const r = await limiter.reserve([perMinute, perDay], 'key', { cost: 200 });
    expect(r.allowed).toBe(false);
    await r.settle(5_000);
    await r.cancel();
    expect((await limiter.peek(perDay, 'key')).remaining).toBe(50_000);
    expect((await limiter.peek(perMinute, 'key')).remaining).toBe(100);
  });

  it('settles once: a second settle or cancel rejects, a bad actual rejects and leaves it open', async () => {
    const { limiter } = memoryHarness();
    const r = await limiter.reserve(perMinute, 'key', { cost: 100 });
    for (const bad of [-1, 1.5, Number.NaN, Infinity]) {
      await expect(r.settle(bad)).rejects.toThrow(
        new RateLimitConfigError(`reserve: settle(${String(bad)}): the actual cost must be a whole number of units ≥ 0.`),
      );
    }
    await r.settle(40);
    const again = 'reserve: this reservation is already settled (or cancelled); a reservation settles once.';
    await expect(r.settle(40)).rejects.toThrow(new RateLimitConfigError(again));
    await expect(r.cancel()).rejects.toThrow(new RateLimitConfigError(again));
    expect((await limiter.peek(perMinute, 'key')).remaining).toBe(1_960);
  });

  it('refuses concurrency policies and repeated names', async () => {
    const { limiter } = memoryHarness();
    await expect(limiter.reserve({ name: 'c', algorithm: 'concurrency', limit: 2, window: '1m' }, 'key')).rejects.toThrow(
      "reserve: policy 'c' uses 'concurrency', which has no reservations: a lease holds a slot, not a cost; use lease().",
    );
    await expect(limiter.reserve([perMinute, { ...perDay, name: 'minute' }], 'key')).rejects.toThrow(
      "reserve: two policies are named 'minute'; give each policy of one call its own name.",
    );
  });
});

describe('settle and quotaUnit are checked at bootstrap', () => {
  const registry = new RateLimitAlgorithmRegistry();
  const compile = (policy: Partial<RateLimitPolicy>) => () =>
    compilePolicy(
      { algorithm: 'fixed-window', limit: 10, window: '1m', ...policy } as RateLimitPolicy,
      registry,
      '@RateLimit on C.h',
      'r=C.h',
    );
  const settle = () => 1;

  it.each<[Partial<RateLimitPolicy>, string]>([
    [{ settle: 5 as never }, 'settle: 5 must be a function (context, result) => number | Promise<number>.'],
    [
      { settle, countOnly: 'failed' },
      'settle cannot be combined with countOnly: "failed"; settle returns 0 for an outcome that should not count.',
    ],
    [
      { settle, algorithm: 'concurrency' },
      "settle cannot be combined with 'concurrency': a lease has no cost to settle, it is given back whole when the work ends.",
    ],
    [{ quotaUnit: 'tokens' as never }, `quotaUnit: "tokens" must be one of 'requests', 'content-bytes', 'concurrent-requests'.`],
    [
      { quotaUnit: 'concurrent-requests' },
      "quotaUnit: 'concurrent-requests' is the unit of 'concurrency' policies; 'fixed-window' counts a rate ('requests' or 'content-bytes').",
    ],
    [
      { algorithm: 'concurrency', quotaUnit: 'content-bytes' },
      "quotaUnit: 'content-bytes' cannot be the unit of a 'concurrency' policy, which counts requests in flight ('concurrent-requests').",
    ],
  ])('%p fails, naming the field', (policy, message) => {
    expect(compile(policy)).toThrow(new RateLimitConfigError(`@RateLimit on C.h: ${message}`));
  });

  it('takes settle on every counting algorithm, and the units each may state', () => {
    for (const algorithm of COUNTING) {
      expect(compile({ algorithm, settle, quotaUnit: 'content-bytes' })).not.toThrow();
      expect(compile({ algorithm, settle, quotaUnit: 'requests' })).not.toThrow();
    }
    expect(compile({ algorithm: 'concurrency', quotaUnit: 'concurrent-requests' })).not.toThrow();
  });
});
