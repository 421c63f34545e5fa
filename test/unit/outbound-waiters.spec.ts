/**
 * `acquire()`'s wait queue, `pause()`, `pauseFromResponse()` and `wrapFetch()` on the memory store, exact:
 * jest's fake clock drives the store (its clock is `Date.now`), the waits' timers and `performance.now()`, so
 * every call is settled at a known instant. Also: abort, shutdown and `maxWaiters`, and that nothing is left
 * behind (timers, abort listeners, queued calls).
 */
import { getEventListeners } from 'node:events';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import { RateLimitShutdownError, RateLimitWaitError } from '../../lib/errors/rate-limit-wait.error';
import type { RateLimitDecision } from '../../lib/interfaces/decision.interface';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService, type AcquireOptions } from '../../lib/rate-limiter.service';
import { MemoryStore } from '../../lib/stores/memory/memory.store';

/** A whole number of seconds, so fixed windows start exactly here. */
const T0 = Date.UTC(2025, 0, 1);
/** Two units per second (one every 500 ms), a burst of two. */
const GCRA: RateLimitPolicy = { algorithm: 'gcra', limit: 2, window: '1s', name: 'partner' };

function setup(options: Partial<RateLimitModuleOptions> = {}) {
  const store = new MemoryStore();
  const asks = jest.spyOn(store, 'decideSync');
  const limiter = new RateLimiterService(new RateLimitEngine(store), new RateLimitAlgorithmRegistry(), { prefix: 'x', ...options });
  /** Settled calls as `[label, ms after T0, outcome]`, in the order they settled. */
  const log: Array<[string, number, string]> = [];
  const call = (label: string, policy: RateLimitPolicy, options: AcquireOptions = {}, key = 'partner-api') =>
    limiter.acquire(policy, key, options).then(
      (d: RateLimitDecision) => void log.push([label, Date.now() - T0, d.allowed ? 'granted' : 'resolved, not allowed']),
      (e: Error) => void log.push([label, Date.now() - T0, e.message]),
    );
  /** Store decisions made for the consumes of `acquire` (not peeks). */
  const consumes = () => asks.mock.calls.filter(([, mode]) => mode === 'consume').length;
  return { store, limiter, log, call, consumes };
}

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
});
afterEach(() => {
  jest.useRealTimers();
});

describe('acquire: first come, first served', () => {
  it('serves waiters in order, the next one at once when the previous is admitted; only the head asks the store', async () => {
    const { call, log, consumes } = setup();
    const calls = ['a', 'b', 'c', 'd', 'e'].map((label) => call(label, GCRA));
    await jest.advanceTimersByTimeAsync(2_000);
    await Promise.all(calls);
    expect(log).toEqual([
      ['a', 0, 'granted'],
      ['b', 0, 'granted'],
      ['c', 500, 'granted'],
      ['d', 1_000, 'granted'],
      ['e', 1_500, 'granted'],
    ]);
    // Five admissions, and one "wait" answer for each of c, d and e: no caller but the head ever asked.
    expect(consumes()).toBe(8);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('rejects at once a waiter whose turn (the head’s retry, then the policy’s pace) comes after its maxWaitMs', async () => {
    const { call, log, limiter } = setup();
    await Promise.all([call('a', GCRA), call('b', GCRA)]);
    const waits = ['c', 'd', 'e'].map((label) => call(label, GCRA, { maxWaitMs: 1_200 }));
    await jest.advanceTimersByTimeAsync(0);
    // c waits 500 ms, d 1000; e could start 1500 ms on at the soonest: it is told now.
    expect(log.slice(2)).toEqual([
      [
        'e',
        0,
        "acquire: 'partner-api' would wait at least 1500 ms for policy 'partner' behind 2 earlier calls of this process, more than maxWaitMs (1200 ms).",
      ],
    ]);
    // A late-comer, while the head sleeps, is told synchronously with the same reckoning.
    const late = await limiter.acquire(GCRA, 'partner-api', { maxWaitMs: 1_200 }).catch((e: RateLimitWaitError) => e);
    expect(late).toBeInstanceOf(RateLimitWaitError);
    expect((late as RateLimitWaitError).retryAfterMs).toBe(1_500);
    await jest.advanceTimersByTimeAsync(1_000);
    await Promise.all(waits);
    expect(log.slice(3)).toEqual([
      ['c', 500, 'granted'],
      ['d', 1_000, 'granted'],
    ]);
  });

  it('a window algorithm: a window holds `limit` calls, so the calls past the next window are rejected at once', async () => {
    const { call, log } = setup();
    const fixed: RateLimitPolicy = { algorithm: 'fixed-window', limit: 3, window: '1s', name: 'partner' };
    await Promise.all(['a', 'b', 'c'].map((label) => call(label, fixed)));
    const waits = ['d', 'e', 'f', 'g', 'h', 'i', 'j'].map((label) => call(label, fixed, { maxWaitMs: 1_500 }));
    await jest.advanceTimersByTimeAsync(2_000);
    await Promise.all(waits);
    const at = (label: string) => log.find(([l]) => l === label)!.slice(1);
    // d is the head (the next window, 1000 ms on); e and f fit that window; g, h, i and then j need the one after.
    expect(['d', 'e', 'f'].map(at)).toEqual([
      [1_000, 'granted'],
      [1_000, 'granted'],
      [1_000, 'granted'],
    ]);
    expect(['g', 'h', 'i', 'j'].map(at).map(([ms]) => ms)).toEqual([0, 0, 0, 0]);
    expect(at('j')[1]).toBe(
      "acquire: 'partner-api' would wait at least 2000 ms for policy 'partner' behind 3 earlier calls of this process, more than maxWaitMs (1500 ms).",
    );
  });

  it('a waiter told, once it is the head, to retry past its deadline rejects then (someone else took the quota)', async () => {
    const { call, log, limiter } = setup();
    await Promise.all([call('a', GCRA), call('b', GCRA)]);
    const c = call('c', GCRA, { maxWaitMs: 700 });
    await jest.advanceTimersByTimeAsync(100);
    // Another process takes the unit c is waiting for.
    await limiter.penalty(GCRA, 'partner-api', 1);
    await jest.advanceTimersByTimeAsync(400);
    await c;
    expect(log[2]).toEqual(['c', 500, "acquire: 'partner-api' would wait 500 ms for policy 'partner', more than maxWaitMs (700 ms)."]);
  });

  it('leaky-bucket: a slot whose delay ends after maxWaitMs is given back', async () => {
    const { call, log, limiter } = setup();
    const leaky: RateLimitPolicy = { algorithm: 'leaky-bucket', limit: 2, window: '1s', burst: 4, name: 'partner' };
    const calls = ['a', 'b', 'c', 'd'].map((label) => call(label, leaky, { maxWaitMs: 1_200 }));
    await jest.advanceTimersByTimeAsync(0);
    expect(log).toEqual([
      ['a', 0, 'granted'],
      [
        'd',
        0,
        "acquire: 'partner-api' would wait 1500 ms for its slot under policy 'partner', more than maxWaitMs (1200 ms); the slot was given back.",
      ],
    ]);
    expect((await limiter.peek(leaky, 'partner-api')).remaining).toBe(1);
    await jest.advanceTimersByTimeAsync(1_000);
    await Promise.all(calls);
    expect(log.slice(2)).toEqual([
      ['b', 500, 'granted'],
      ['c', 1_000, 'granted'],
    ]);
  });

  it('different keys and policies do not wait for each other', async () => {
    const { call, log } = setup();
    await Promise.all([call('a', GCRA), call('b', GCRA)]);
    const other: RateLimitPolicy = { ...GCRA, name: 'other' };
    const waits = [call('c', GCRA), call('d', GCRA, {}, 'another-key'), call('e', other)];
    await jest.advanceTimersByTimeAsync(500);
    await Promise.all(waits);
    expect(log.slice(2)).toEqual([
      ['d', 0, 'granted'],
      ['e', 0, 'granted'],
      ['c', 500, 'granted'],
    ]);
  });
});

describe('acquire: bounded, and nothing left behind', () => {
  const at = (log: Array<[string, number, string]>, label: string) => log.find(([l]) => l === label)?.slice(1);

  it('maxWaiters: the module default, or the call’s own; past it the call is rejected at once', async () => {
    const { call, log, limiter } = setup({ maxWaiters: 3 });
    const calls = ['a', 'b', 'c', 'd'].map((label) => call(label, GCRA));
    calls.push(call('e', GCRA, { maxWaiters: 5 }), call('f', GCRA, { maxWaiters: 1 }));
    await jest.advanceTimersByTimeAsync(0);
    expect(at(log, 'd')).toEqual([
      0,
      "acquire: 3 calls of this process already wait for 'partner-api' under policy 'partner' (maxWaiters 3).",
    ]);
    expect(at(log, 'f')).toEqual([
      0,
      "acquire: 4 calls of this process already wait for 'partner-api' under policy 'partner' (maxWaiters 1).",
    ]);
    expect([at(log, 'a'), at(log, 'b')]).toEqual([
      [0, 'granted'],
      [0, 'granted'],
    ]);
    expect(limiter.waiting(GCRA, 'partner-api')).toBe(2);
    await jest.advanceTimersByTimeAsync(1_000);
    await Promise.all(calls);
    expect([at(log, 'c'), at(log, 'e')]).toEqual([
      [500, 'granted'],
      [1_000, 'granted'],
    ]);
    expect(limiter.waiting(GCRA, 'partner-api')).toBe(0);
  });

  it('rejects a bad maxWaitMs or maxWaiters, naming the field', async () => {
    const { limiter } = setup();
    await expect(limiter.acquire(GCRA, 'k', { maxWaiters: 0 })).rejects.toThrow(
      new RateLimitConfigError('acquire: maxWaiters: 0 must be a whole number ≥ 1.'),
    );
    await expect(limiter.acquire(GCRA, 'k', { maxWaitMs: Number.NaN })).rejects.toThrow(
      'acquire: maxWaitMs: NaN must be a number of milliseconds ≥ 0 (Infinity: no limit).',
    );
  });

  it('bad input and a closed module reject the returned promise (acquire never throws), with the messages of every method', async () => {
    const { limiter } = setup();
    const outcome = (make: () => Promise<unknown>) => {
      let promise: Promise<unknown> | undefined;
      expect(() => (promise = make())).not.toThrow();
      return promise!.then(
        () => 'granted',
        (e: Error) => `${e.name}: ${e.message}`,
      );
    };
    const config = 'RateLimitConfigError: RateLimiterService: policy ';
    expect(
      await Promise.all([
        outcome(() => limiter.acquire(GCRA, '')),
        outcome(() => limiter.acquire(GCRA, 'k', { cost: 1.5 })),
        outcome(() => limiter.acquire({ ...GCRA, limit: () => 2 }, 'k')),
        outcome(() => limiter.acquire({ ...GCRA, cost: () => 2 }, 'k')),
        outcome(() => limiter.acquire({ ...GCRA, limit: 0 }, 'k')),
        outcome(() => limiter.acquire(GCRA, 'k', null as unknown as AcquireOptions)),
      ]),
    ).toEqual([
      `RateLimitConfigError: key: "" must be a non-empty string ('ip:<address>', 'user:<id>', or what a by function returns).`,
      'RateLimitConfigError: cost: 1.5 must be a whole number of units ≥ 0.',
      `${config}'partner' computes its limit or window from the request context, which a programmatic call does not have; pass numbers.`,
      `${config}'partner' computes its cost from the request context; pass { cost } to the call.`,
      'RateLimitConfigError: RateLimiterService: limit: 0 must be a whole number ≥ 1.',
      "TypeError: Cannot read properties of null (reading 'cost')",
    ]);
    limiter.onApplicationShutdown();
    expect(await outcome(() => limiter.acquire(GCRA, 'k'))).toBe(
      'RateLimitShutdownError: RateLimiterService: the application is shutting down; the rate-limit store is closed, so nothing is decided.',
    );
  });

  it('calls on one policy + key share what they derive, yet each takes its own cost, under the policy as it is at the call', async () => {
    const { call, log } = setup();
    const policy = { algorithm: 'gcra', limit: 2, window: '1s', name: 'first' } satisfies RateLimitPolicy;
    const calls = [call('a', policy, { cost: 2 }), call('b', policy)];
    await jest.advanceTimersByTimeAsync(0);
    // The same object, another name: another counter, with its whole quota.
    policy.name = 'second';
    calls.push(call('c', policy, { cost: 2 }), call('d', policy, { cost: 2 }));
    await jest.advanceTimersByTimeAsync(1_000);
    await Promise.all(calls);
    expect(log).toEqual([
      ['a', 0, 'granted'],
      ['c', 0, 'granted'],
      ['b', 500, 'granted'],
      ['d', 1_000, 'granted'],
    ]);
  });

  it('abort: a queued call and the sleeping head leave at once; no listener, timer or entry is left', async () => {
    const { call, log, limiter, consumes } = setup();
    await Promise.all([call('a', GCRA), call('b', GCRA)]);
    const controllers = ['c', 'd', 'e'].map(() => new AbortController());
    const waits = ['c', 'd', 'e'].map((label, i) => call(label, GCRA, { signal: controllers[i].signal }));
    await jest.advanceTimersByTimeAsync(100);
    controllers[1].abort();
    await jest.advanceTimersByTimeAsync(100);
    const before = consumes();
    controllers[0].abort();
    await jest.advanceTimersByTimeAsync(0);
    // e became head at 200 and sleeps until the unit c was told of (500) without asking: it cannot come sooner.
    expect(consumes() - before).toBe(0);
    await jest.advanceTimersByTimeAsync(300);
    await Promise.all(waits);
    expect(log.slice(2)).toEqual([
      ['d', 100, 'acquire: aborted by its signal.'],
      ['c', 200, 'acquire: aborted by its signal.'],
      ['e', 500, 'granted'],
    ]);
    for (const { signal } of controllers) expect(getEventListeners(signal, 'abort')).toHaveLength(0);
    expect(jest.getTimerCount()).toBe(0);
    expect(limiter.waiting(GCRA, 'partner-api')).toBe(0);
  });

  it('a signal aborted before the call rejects at once, without asking the store', async () => {
    const { limiter, consumes } = setup();
    const error = await limiter.acquire(GCRA, 'k', { signal: AbortSignal.abort() }).catch((e: RateLimitWaitError) => e);
    expect(error).toMatchObject({ name: 'RateLimitWaitError', aborted: true, message: 'acquire: aborted by its signal.' });
    expect(consumes()).toBe(0);
  });

  it('shutdown ends every queued and sleeping call and every leaky-bucket delay at once, leaving nothing behind', async () => {
    const { call, log, limiter } = setup();
    await Promise.all([call('a', GCRA), call('b', GCRA)]);
    const controller = new AbortController();
    const leaky: RateLimitPolicy = { algorithm: 'leaky-bucket', limit: 2, window: '1s', name: 'shaped' };
    const waits = [call('c', GCRA, { signal: controller.signal }), call('d', GCRA), call('e', GCRA), call('f', leaky), call('g', leaky)];
    await jest.advanceTimersByTimeAsync(100);
    expect(at(log, 'f')).toEqual([0, 'granted']);
    limiter.beforeApplicationShutdown();
    await jest.advanceTimersByTimeAsync(0);
    await Promise.all(waits);
    const ended = "acquire: the application is shutting down; the wait of 'partner-api' for policy 'partner' ended (nothing was taken).";
    expect(log.slice(3)).toEqual([
      ['c', 100, ended],
      ['d', 100, ended],
      ['e', 100, ended],
      ['g', 100, "acquire: the application is shutting down; the delay of 'partner-api' for policy 'shaped' ended (its slot was taken)."],
    ]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    expect(jest.getTimerCount()).toBe(0);
    expect(limiter.waiting(GCRA, 'partner-api')).toBe(0);
    // After: a call that must wait is told at once; one that need not is still decided (the store is open).
    await expect(limiter.acquire(GCRA, 'partner-api')).rejects.toThrow(RateLimitShutdownError);
    expect((await limiter.acquire(GCRA, 'another-key')).allowed).toBe(true);
  });
});

describe('pause', () => {
  it('every call is rejected until the pause ends; acquire waits for it, or is told at once when it ends too late', async () => {
    const { call, log, limiter, consumes } = setup();
    expect(await limiter.pause(GCRA, 'partner-api', '2s')).toBe(2_000);
    expect(await limiter.consume(GCRA, 'partner-api')).toMatchObject({ allowed: false, retryAfterMs: 2_000, reason: 'blocked' });
    const before = consumes();
    const waits = [call('a', GCRA, { maxWaitMs: 1_000 }), call('b', GCRA, { maxWaitMs: 3_000 }), call('c', GCRA, { maxWaitMs: 5_000 })];
    await jest.advanceTimersByTimeAsync(2_000);
    await Promise.all(waits);
    expect(log).toEqual([
      ['a', 0, "acquire: 'partner-api' would wait 2000 ms for policy 'partner', more than maxWaitMs (1000 ms)."],
      ['b', 2_000, 'granted'],
      ['c', 2_000, 'granted'],
    ]);
    // a asked once; b then slept until the pause's end without asking, and b and c were admitted.
    expect(consumes() - before).toBe(3);
  });

  it('until a date on the store clock; a date already past pauses nothing', async () => {
    const { limiter } = setup();
    expect(await limiter.pause(GCRA, 'k', new Date(T0 + 1_500))).toBe(1_500);
    expect((await limiter.peek(GCRA, 'k')).retryAfterMs).toBe(1_500);
    expect(await limiter.pause(GCRA, 'other', new Date(T0 - 1))).toBe(0);
    expect((await limiter.consume(GCRA, 'other')).allowed).toBe(true);
    await expect(limiter.pause(GCRA, 'k', new Date(Number.NaN))).rejects.toThrow('pause: until: null is not a valid date.');
    await expect(limiter.pause(GCRA, 'k', 0)).rejects.toThrow(RateLimitConfigError);
  });

  it('never shortens a longer pause in force (the lockout of block())', async () => {
    const { limiter } = setup();
    await limiter.pause(GCRA, 'k', 3_000);
    expect(await limiter.pause(GCRA, 'k', 1_000)).toBe(1_000);
    expect((await limiter.peek(GCRA, 'k')).retryAfterMs).toBe(3_000);
  });
});

describe('pauseFromResponse and wrapFetch', () => {
  it('pauses for what the response asks, cut to maxPause; nothing when it asks nothing', async () => {
    const { limiter } = setup();
    expect(await limiter.pauseFromResponse(GCRA, 'k', new Response(null, { status: 429, headers: { 'Retry-After': '2' } }))).toBe(2_000);
    expect((await limiter.consume(GCRA, 'k')).retryAfterMs).toBe(2_000);
    const long = { status: 429, headers: { 'retry-after': '100' } };
    expect(await limiter.pauseFromResponse(GCRA, 'k2', long, { maxPause: '30s' })).toBe(30_000);
    expect(await limiter.pauseFromResponse(GCRA, 'k3', new Response('ok'))).toBe(0);
    expect((await limiter.consume(GCRA, 'k3')).allowed).toBe(true);
  });

  it('wrapFetch: a 429 with Retry-After pauses the next calls; the caller gets the response', async () => {
    const { limiter } = setup();
    const partner = jest.fn(async (n: number) =>
      n === 1 ? new Response(null, { status: 429, headers: { 'retry-after': '1' } }) : new Response(`quote ${n}`),
    );
    const partnerFetch = limiter.wrapFetch(GCRA, 'partner-api', partner, { maxWaitMs: 5_000 });
    expect((await partnerFetch(1)).status).toBe(429);
    const second = partnerFetch(2).then(async (r) => ({ ms: Date.now() - T0, body: await r.text() }));
    await jest.advanceTimersByTimeAsync(1_000);
    expect(await second).toEqual({ ms: 1_000, body: 'quote 2' });
    expect(partner).toHaveBeenCalledTimes(2);
  });

  it('a bad maxPause fails when the function is wrapped, not later as a pause that was not recorded', async () => {
    const { limiter } = setup();
    const message = 'maxPause: "soon" is not a valid duration; use a positive whole number of milliseconds';
    expect(() => limiter.wrapFetch(GCRA, 'k', async () => new Response('ok'), { maxPause: 'soon' as '1s' })).toThrow(message);
    await expect(limiter.pauseFromResponse(GCRA, 'k', new Response('ok'), { maxPause: 'soon' as '1s' })).rejects.toThrow(message);
  });

  it('wrapFetch: the response an error carries (axios, got) pauses too; the error reaches the caller', async () => {
    const { limiter } = setup();
    const failure = Object.assign(new Error('Request failed with status code 429'), {
      response: { status: 429, headers: { 'retry-after': '3' } },
    });
    const partnerFetch = limiter.wrapFetch(GCRA, 'partner-api', async () => {
      throw failure;
    });
    await expect(partnerFetch()).rejects.toBe(failure);
    expect(await limiter.peek(GCRA, 'partner-api')).toMatchObject({ allowed: false, retryAfterMs: 3_000, reason: 'blocked' });
  });
});
