/**
 * `acquire()` bursts: 10,000 calls made in one turn on a spent quota, on the memory store with jest's fake
 * clock (which drives the store, the waits' timers and `performance.now()`), so every count and every wait is
 * exact. A join reckons its soonest start from running totals of the line, not a walk over it, so these also
 * pin down that the totals stay right: after a prune, after aborts in the middle of the line, and after the
 * line's empty slots are swept out. How long a burst blocks the event loop is measured by
 * bench/acquire-burst.ts, never asserted here.
 */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitShutdownError, RateLimitWaitError } from '../../lib/errors/rate-limit-wait.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService, type AcquireOptions } from '../../lib/rate-limiter.service';
import { MemoryStore } from '../../lib/stores/memory/memory.store';

/** A whole number of seconds. */
const T0 = Date.UTC(2025, 0, 1);
/** One unit every 10 s, a burst of one. */
const SLOW: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: '10s', name: 'partner' };
const KEY = 'partner-api';
const CALLS = 10_000;

/** How one call ended: granted, or the error it was refused with; `ms` after T0. */
interface Outcome {
  call: number;
  ms: number;
  error?: RateLimitWaitError;
}

function setup() {
  const store = new MemoryStore();
  const asks = jest.spyOn(store, 'decideSync');
  const limiter = new RateLimiterService(new RateLimitEngine(store), new RateLimitAlgorithmRegistry(), { prefix: 'x' });
  /** Store decisions made for consumes (not peeks). */
  const consumes = () => asks.mock.calls.filter(([, mode]) => mode === 'consume').length;
  /** Settled calls, in the order they settled. */
  const outcomes: Outcome[] = [];
  /** `n` calls made in one turn, numbered from `from`. */
  const burst = (n: number, options: (call: number) => AcquireOptions = () => ({}), from = 0, policy = SLOW) =>
    Array.from({ length: n }, (_, i) =>
      limiter.acquire(policy, KEY, options(from + i)).then(
        () => void outcomes.push({ call: from + i, ms: Date.now() - T0 }),
        (error: RateLimitWaitError) => void outcomes.push({ call: from + i, ms: Date.now() - T0, error }),
      ),
    );
  const granted = () => outcomes.filter((o) => !o.error).map((o) => [o.call, o.ms]);
  const refused = () => outcomes.filter((o) => o.error);
  return { limiter, consumes, outcomes, burst, granted, refused };
}

/** The outcomes that are not a RateLimitWaitError (not a shutdown) with this message, retryAfterMs and aborted. */
function unlike(outcomes: Outcome[], message: string, retryAfterMs: number, aborted = false): Outcome[] {
  return outcomes.filter(
    ({ error }) =>
      !(error instanceof RateLimitWaitError) ||
      error instanceof RateLimitShutdownError ||
      error.message !== message ||
      error.retryAfterMs !== retryAfterMs ||
      error.aborted !== aborted,
  );
}

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
});
afterEach(() => {
  jest.useRealTimers();
});

describe('acquire: 10,000 calls in one turn on a spent quota', () => {
  it('default maxWaiters: the first 1,000 wait, the 9,000 after them are refused at once, each with an error of its own', async () => {
    const { limiter, consumes, outcomes, burst, granted, refused } = setup();
    await limiter.consume(SLOW, KEY);
    const before = consumes();
    const calls = burst(CALLS);
    await jest.advanceTimersByTimeAsync(0);
    expect(granted()).toEqual([]);
    expect(refused().map((o) => o.call)).toEqual(range(1_000, CALLS));
    // The head's first answer was still on its way while they joined: the counter had told nothing, so 0 ms.
    const full = "acquire: 1000 calls of this process already wait for 'partner-api' under policy 'partner' (maxWaiters 1000).";
    expect(unlike(refused(), full, 0)).toEqual([]);
    expect(new Set(refused().map((o) => o.error)).size).toBe(9_000);
    // No stack trace: thousands are built in one turn, and the message says what to change.
    expect(refused()[0].error!.stack).toBe(`RateLimitWaitError: ${full}`);
    expect(outcomes.every((o) => o.ms === 0)).toBe(true);
    expect(limiter.waiting(SLOW, KEY)).toBe(1_000);
    // Only the head asked.
    expect(consumes() - before).toBe(1);

    await jest.advanceTimersByTimeAsync(30_000);
    expect(granted()).toEqual([
      [0, 10_000],
      [1, 20_000],
      [2, 30_000],
    ]);
    // Each admission, and the next head told to retry in 10 s: two store calls per turn, never more.
    expect(consumes() - before).toBe(7);
    limiter.beforeApplicationShutdown();
    await Promise.all(calls);
    const ended = outcomes.slice(9_003);
    expect(ended.map((o) => o.call)).toEqual(range(3, 1_000));
    expect(ended.every((o) => o.error instanceof RateLimitShutdownError && o.ms === 30_000)).toBe(true);
    expect(limiter.waiting(SLOW, KEY)).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('behind a sleeping head, with maxWaitMs 60 s: 5 join, and each of the 9,995 others is told the same exact soonest start', async () => {
    const { limiter, burst, granted, refused } = setup();
    await limiter.consume(SLOW, KEY);
    const head = limiter.acquire(SLOW, KEY).then(() => Date.now() - T0);
    await jest.advanceTimersByTimeAsync(0);
    const calls = burst(CALLS, () => ({ maxWaitMs: 60_000, maxWaiters: CALLS }));
    await jest.advanceTimersByTimeAsync(0);
    // The head's turn comes at 10 s, the i-th call's behind it 10 s × i later: calls 0–4 start by 60 s.
    expect(refused().map((o) => o.call)).toEqual(range(5, CALLS));
    const late =
      "acquire: 'partner-api' would wait at least 70000 ms for policy 'partner' behind 6 earlier calls of this process, more than maxWaitMs (60000 ms).";
    expect(unlike(refused(), late, 70_000)).toEqual([]);
    expect(limiter.waiting(SLOW, KEY)).toBe(6);

    await jest.advanceTimersByTimeAsync(60_000);
    await Promise.all(calls);
    expect(await head).toBe(10_000);
    expect(granted()).toEqual(range(0, 5).map((call) => [call, 20_000 + call * 10_000]));
    expect(jest.getTimerCount()).toBe(0);
  });

  it('all join while the head’s first answer is on its way; that answer turns away at once all but the 5 that fit 60 s', async () => {
    const { limiter, burst, granted, refused } = setup();
    await limiter.consume(SLOW, KEY);
    const calls = burst(CALLS, () => ({ maxWaitMs: 60_000, maxWaiters: CALLS }));
    expect(limiter.waiting(SLOW, KEY)).toBe(CALLS);
    await jest.advanceTimersByTimeAsync(0);
    expect(refused().map((o) => o.call)).toEqual(range(6, CALLS));
    const late =
      "acquire: 'partner-api' would wait at least 70000 ms for policy 'partner' behind 6 earlier calls of this process, more than maxWaitMs (60000 ms).";
    expect(unlike(refused(), late, 70_000)).toEqual([]);
    expect(limiter.waiting(SLOW, KEY)).toBe(6);
    // A late-comer reckons with the line as the prune left it (6 calls, 6 units): 10 s + 6 × 10 s.
    const next = await limiter.acquire(SLOW, KEY, { maxWaitMs: 60_000, maxWaiters: CALLS }).catch((e: RateLimitWaitError) => e);
    expect(next).toMatchObject({ message: late, retryAfterMs: 70_000 });

    await jest.advanceTimersByTimeAsync(60_000);
    await Promise.all(calls);
    expect(granted()).toEqual(range(0, 6).map((call) => [call, 10_000 + call * 10_000]));
  });
});

describe('acquire: aborts in the middle of a line keep its totals exact', () => {
  /** One unit a second, a burst of 10. */
  const BURSTY: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: '1s', burst: 10, name: 'partner' };

  it('calls of different costs: a late-comer’s soonest start counts the units still ahead of it, and no others', async () => {
    const { limiter, outcomes } = setup();
    await limiter.consume(BURSTY, KEY, { cost: 10 });
    const controllers = new Map(['a', 'b', 'c', 'd'].map((label) => [label, new AbortController()]));
    const costs = { a: 1, b: 2, c: 3, d: 4 };
    const calls = Object.entries(costs).map(([label, cost]) =>
      limiter.acquire(BURSTY, KEY, { cost, signal: controllers.get(label)!.signal }).then(
        () => void outcomes.push({ call: cost, ms: Date.now() - T0 }),
        (error: RateLimitWaitError) => void outcomes.push({ call: cost, ms: Date.now() - T0, error }),
      ),
    );
    await jest.advanceTimersByTimeAsync(0);
    const lateComer = (maxWaitMs: number) =>
      limiter.acquire(BURSTY, KEY, { maxWaitMs }).catch((e: RateLimitWaitError) => [e.retryAfterMs, e.message]);
    // a, the head, was told its unit comes at 1 s; behind it 2 + 3 + 4 units, then the late-comer's own: 1 s + 10 s.
    expect(await lateComer(5_000)).toEqual([
      11_000,
      "acquire: 'partner-api' would wait at least 11000 ms for policy 'partner' behind 4 earlier calls of this process, more than maxWaitMs (5000 ms).",
    ]);
    controllers.get('c')!.abort();
    expect(await lateComer(5_000)).toEqual([
      8_000,
      "acquire: 'partner-api' would wait at least 8000 ms for policy 'partner' behind 3 earlier calls of this process, more than maxWaitMs (5000 ms).",
    ]);
    controllers.get('b')!.abort();
    expect(await lateComer(5_000)).toEqual([
      6_000,
      "acquire: 'partner-api' would wait at least 6000 ms for policy 'partner' behind 2 earlier calls of this process, more than maxWaitMs (5000 ms).",
    ]);
    // The sleeping head leaves: d heads the line, and nothing sleeps on the counter's word any more, so a call
    // can start when the unit a was told of comes (a lower bound: d may take it).
    controllers.get('a')!.abort();
    expect(await lateComer(500)).toEqual([
      1_000,
      "acquire: 'partner-api' would wait at least 1000 ms for policy 'partner' behind 1 earlier call of this process, more than maxWaitMs (500 ms).",
    ]);
    expect(limiter.waiting(BURSTY, KEY)).toBe(1);
    await jest.advanceTimersByTimeAsync(4_000);
    await Promise.all(calls);
    expect(outcomes.map(({ call, ms, error }) => [call, ms, error?.message ?? 'granted'])).toEqual([
      [3, 0, 'acquire: aborted by its signal.'],
      [2, 0, 'acquire: aborted by its signal.'],
      [1, 0, 'acquire: aborted by its signal.'],
      // d (4 units) asks at 1 s, is told 3 s more, and gets them at 4 s.
      [4, 4_000, 'granted'],
    ]);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('600 aborts in the middle of a full line, then the line refills: counts, refusals and order stay exact', async () => {
    const { limiter, burst, granted, refused, outcomes } = setup();
    await limiter.consume(SLOW, KEY);
    const controllers = range(0, 1_000).map(() => new AbortController());
    const calls = burst(1_000, (call) => ({ signal: controllers[call].signal }));
    await jest.advanceTimersByTimeAsync(0);
    // Call 0 sleeps until 10 s; calls 2–601 leave the middle of the line.
    for (const call of range(2, 602)) controllers[call].abort();
    await jest.advanceTimersByTimeAsync(0);
    expect(refused().map((o) => o.call)).toEqual(range(2, 602));
    expect(unlike(refused(), 'acquire: aborted by its signal.', 0, true)).toEqual([]);
    expect(limiter.waiting(SLOW, KEY)).toBe(400);
    const tooLate = await limiter.acquire(SLOW, KEY, { maxWaitMs: 1_000 }).catch((e: RateLimitWaitError) => e);
    // Behind the head (10 s), 399 units, then its own: 10 s + 400 × 10 s.
    expect(tooLate).toMatchObject({
      retryAfterMs: 4_010_000,
      message:
        "acquire: 'partner-api' would wait at least 4010000 ms for policy 'partner' behind 400 earlier calls of this process, more than maxWaitMs (1000 ms).",
    });
    // 600 more fill the line to maxWaiters again; the one after them is refused, reckoning with all 1,000.
    calls.push(...burst(601, () => ({}), 1_000));
    await jest.advanceTimersByTimeAsync(0);
    expect(limiter.waiting(SLOW, KEY)).toBe(1_000);
    expect(outcomes.at(-1)).toMatchObject({ call: 1_600 });
    expect(outcomes.at(-1)!.error).toMatchObject({
      retryAfterMs: 10_010_000,
      message: "acquire: 1000 calls of this process already wait for 'partner-api' under policy 'partner' (maxWaiters 1000).",
    });
    // First come, first served, past the holes.
    await jest.advanceTimersByTimeAsync(30_000);
    expect(granted()).toEqual([
      [0, 10_000],
      [1, 20_000],
      [602, 30_000],
    ]);
    limiter.beforeApplicationShutdown();
    await Promise.all(calls);
    expect(outcomes.slice(-997).map((o) => o.call)).toEqual([...range(603, 1_000), ...range(1_000, 1_600)]);
    expect(limiter.waiting(SLOW, KEY)).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('acquire: a head that leaves', () => {
  it('told to retry past its own deadline, it leaves, and so at once does each call behind it that the answer leaves too late', async () => {
    const { limiter, outcomes, burst } = setup();
    await limiter.consume(SLOW, KEY);
    // All four join while the head's first answer is on its way.
    const maxWaitMs = [5_000, Infinity, 8_000, 20_000];
    const calls = burst(4, (call) => ({ maxWaitMs: maxWaitMs[call] }));
    await jest.advanceTimersByTimeAsync(0);
    const log = () => outcomes.map(({ call, ms, error }) => [call, ms, error?.message ?? 'granted']);
    expect(log()).toEqual([
      [0, 0, "acquire: 'partner-api' would wait 10000 ms for policy 'partner', more than maxWaitMs (5000 ms)."],
      [
        2,
        0,
        "acquire: 'partner-api' would wait at least 10000 ms for policy 'partner' behind 1 earlier call of this process, more than maxWaitMs (8000 ms).",
      ],
    ]);
    expect(limiter.waiting(SLOW, KEY)).toBe(2);
    await jest.advanceTimersByTimeAsync(20_000);
    await Promise.all(calls);
    expect(log().slice(2)).toEqual([
      [1, 10_000, 'granted'],
      [3, 20_000, 'granted'],
    ]);
  });
});
