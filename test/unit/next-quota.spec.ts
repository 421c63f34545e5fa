/**
 * `moreQuotaMs`, the draft's `t`: ms until `remaining` grows by at least one unit if nothing else happens
 * (not until the quota is fully restored, which stays `resetMs`). Exact numbers per algorithm on the memory
 * twin, then a property: for any trace, `remaining` has not grown 1 ms before `moreQuotaMs` and has at
 * `moreQuotaMs`; `0` only when nothing is used.
 */
import fc from 'fast-check';
import { secondsUntilMore } from '../../lib/http/header-profiles';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { memoryHarness, T0 } from '../support/memory-harness';

const S = 1000;

describe('moreQuotaMs: the examples of the finding', () => {
  it('sliding-log 5 per 10 s, hits at 0, 3 and 6 s: r=2, t=4 (the entry of 0 s ages out at 10 s)', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 5, window: 10 * S };
    await h.limiter.consume(policy, 'k');
    h.at(T0 + 3 * S);
    await h.limiter.consume(policy, 'k');
    h.at(T0 + 6 * S);
    const d = await h.limiter.consume(policy, 'k');
    expect(d).toMatchObject({ allowed: true, remaining: 2, resetMs: 10 * S, moreQuotaMs: 4 * S });
    expect(secondsUntilMore(d)).toBe(4);
    h.at(T0 + 10 * S - 1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(2);
    h.at(T0 + 10 * S);
    expect(await h.limiter.peek(policy, 'k')).toMatchObject({ remaining: 3, moreQuotaMs: 3 * S });
  });

  it('token-bucket 1/s burst 10 after 3 hits: r=7, t=1 (the next token), reset 3 s', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: S, burst: 10 };
    await h.limiter.consume(policy, 'k');
    await h.limiter.consume(policy, 'k');
    const d = await h.limiter.consume(policy, 'k');
    expect(d).toMatchObject({ allowed: true, remaining: 7, resetMs: 3 * S, moreQuotaMs: S });
    expect(secondsUntilMore(d)).toBe(1);
  });

  it('sliding-window 5 per 10 s: t is when the weighted count has dropped by one unit, in this window', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 5, window: 10 * S };
    for (let i = 0; i < 5; i++) await h.limiter.consume(policy, 'k'); // previous window: 5
    h.at(T0 + 12 * S); // 2 s into the next window: 5·8/10 = 4 used, 1 left
    const d = await h.limiter.consume(policy, 'k');
    // 5·(10 − e)/10 + 1 ≤ 4 ⇔ e ≥ 4 s: 2 s from now; the quota is whole again only at 30 s.
    expect(d).toMatchObject({ allowed: true, remaining: 0, resetMs: 18 * S, moreQuotaMs: 2 * S });
    expect(secondsUntilMore(d)).toBe(2);
    h.advance(2 * S - 1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(0);
    h.advance(1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(1);
  });
});

describe('moreQuotaMs per algorithm (exact)', () => {
  it('fixed-window: the window end once anything is counted, 0 on an untouched key; rejected too', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 2, window: S };
    expect(await h.limiter.peek(policy, 'k')).toMatchObject({ remaining: 2, moreQuotaMs: 0 });
    h.at(T0 + 300);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ remaining: 1, moreQuotaMs: 700 });
    await h.limiter.consume(policy, 'k');
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 700, moreQuotaMs: 700 });
  });

  it('sliding-window: across the boundary, where the current count becomes the previous one', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 5, window: 10 * S };
    h.at(T0 + 9 * S);
    for (let i = 0; i < 4; i++) await h.limiter.consume(policy, 'k');
    const d = await h.limiter.consume(policy, 'k');
    // 5·(10 − e)/10 ≤ 4 in the next window ⇔ e ≥ 2 s: at 12 s, 3 s from now.
    expect(d).toMatchObject({ remaining: 0, resetMs: 11 * S, moreQuotaMs: 3 * S });
    h.at(T0 + 12 * S - 1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(0);
    h.at(T0 + 12 * S);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(1);
  });

  it('sliding-window: when this window can never make room, the next one does (exactly at its start here)', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 5, window: 10 * S };
    await h.limiter.consume(policy, 'k'); // previous window: 1
    h.at(T0 + 19 * S); // 1·1/10 used
    for (let i = 0; i < 3; i++) await h.limiter.consume(policy, 'k');
    const d = await h.limiter.consume(policy, 'k'); // 0.1 + 4 used: 0 left
    expect(d).toMatchObject({ remaining: 0, moreQuotaMs: S });
    h.at(T0 + 20 * S - 1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(0);
    h.at(T0 + 20 * S);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(1);
  });

  it('sliding-window: one hit is only forgotten once it has left the weighted previous window', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 5, window: 10 * S };
    h.at(T0 + 2 * S);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ remaining: 4, resetMs: 18 * S, moreQuotaMs: 18 * S });
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ remaining: 3, moreQuotaMs: 13 * S });
  });

  it('sliding-log: a rejection says when the oldest entry ages out; a lowered limit, the one that brings it under', async () => {
    const h = memoryHarness();
    const wide: RateLimitPolicy = { algorithm: 'sliding-log', limit: 4, window: S };
    for (const at of [0, 100, 200, 300]) {
      h.at(T0 + at);
      await h.limiter.consume(wide, 'k');
    }
    h.at(T0 + 400);
    expect(await h.limiter.consume(wide, 'k', { cost: 2 })).toMatchObject({ allowed: false, retryAfterMs: 700, moreQuotaMs: 600 });
    // Limit 2 with 4 entries: remaining grows once 3 have aged out, at T0 + 1200.
    const narrow: RateLimitPolicy = { ...wide, limit: 2 };
    expect(await h.limiter.peek(narrow, 'k')).toMatchObject({ allowed: false, remaining: 0, moreQuotaMs: 800 });
  });

  it.each(['token-bucket', 'gcra', 'leaky-bucket'] as const)('%s: the next whole unit, fractions kept', async (algorithm) => {
    const h = memoryHarness();
    // 3 per 1000 ms: one unit every 333⅓ ms.
    const policy: RateLimitPolicy = { algorithm, limit: 3, window: S, delay: false };
    expect(await h.limiter.peek(policy, 'k')).toMatchObject({ remaining: 3, moreQuotaMs: 0 });
    await h.limiter.consume(policy, 'k');
    await h.limiter.consume(policy, 'k');
    h.advance(100); // 1 + 0.3 units
    expect(await h.limiter.peek(policy, 'k')).toMatchObject({ remaining: 1, moreQuotaMs: 234, resetMs: 567 });
    expect(await h.limiter.consume(policy, 'k', { cost: 2 })).toMatchObject({
      allowed: false,
      remaining: 1,
      retryAfterMs: 234,
      moreQuotaMs: 234,
    });
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: true, remaining: 0, moreQuotaMs: 234, resetMs: 900 });
  });

  it('concurrency: the soonest lease expiry, 0 when none is held', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'concurrency', limit: 2, window: S };
    expect(await h.limiter.peek(policy, 'k')).toMatchObject({ remaining: 2, moreQuotaMs: 0 });
    await h.limiter.consume(policy, 'k');
    h.advance(300);
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ remaining: 0, resetMs: S, moreQuotaMs: 700 });
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: false, retryAfterMs: 700, moreQuotaMs: 700 });
  });

  it('a lockout: until it ends, on the rejection that starts it and on those it rejects', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1, window: S, blockFor: 5 * S };
    await h.limiter.consume(policy, 'k');
    expect(await h.limiter.consume(policy, 'k')).toMatchObject({ allowed: false, retryAfterMs: 5 * S, moreQuotaMs: 5 * S });
    h.advance(2 * S);
    const d = await h.limiter.consume(policy, 'k');
    expect(d).toMatchObject({ allowed: false, reason: 'blocked', remaining: 0, retryAfterMs: 3 * S, moreQuotaMs: 3 * S });
    expect(secondsUntilMore(d)).toBe(3);
  });

  it('t on a rejection is when more quota comes; the wait of a larger request stays Retry-After', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: S, burst: 3 };
    await h.limiter.consume(policy, 'k', { cost: 2 });
    const d = await h.limiter.consume(policy, 'k', { cost: 3 });
    expect(d).toMatchObject({ allowed: false, remaining: 1, retryAfterMs: 2 * S, moreQuotaMs: S });
    expect(secondsUntilMore(d)).toBe(1);
    const never = await h.limiter.consume(policy, 'k', { cost: 4 });
    expect(never).toMatchObject({ reason: 'cost-exceeds-capacity', retryAfterMs: Infinity, moreQuotaMs: S });
    expect(secondsUntilMore(never)).toBe(1);
  });
});

describe('moreQuotaMs property (memory twin)', () => {
  const step = fc.record({ gap: fc.integer({ min: 0, max: 700 }), cost: fc.integer({ min: 0, max: 3 }), peek: fc.boolean() });

  it.each(RATE_LIMIT_ALGORITHMS.map((a) => [a] as [RateLimitAlgorithmName]))(
    '%s: remaining has not grown 1 ms before moreQuotaMs, and has at moreQuotaMs; 0 only when nothing is used',
    async (algorithm) => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 5 }),
          fc.constantFrom(1000, 700, 333),
          fc.integer({ min: 0, max: 3 }),
          fc.array(step, { minLength: 1, maxLength: 12 }),
          async (limit, window, extra, trace) => {
            const h = memoryHarness();
            const policy: RateLimitPolicy = { algorithm, limit, window, burst: limit + extra, delay: false };
            const capacity = ['token-bucket', 'gcra', 'leaky-bucket'].includes(algorithm) ? limit + extra : limit;
            let d = await h.limiter.peek(policy, 'k');
            for (const s of trace) {
              h.advance(s.gap);
              d = s.peek ? await h.limiter.peek(policy, 'k') : await h.limiter.consume(policy, 'k', { cost: s.cost });
            }
            if (d.moreQuotaMs === 0) {
              expect(d.remaining).toBe(capacity);
              return;
            }
            expect(d.moreQuotaMs).toBeGreaterThan(0);
            expect(d.moreQuotaMs).toBeLessThanOrEqual(d.resetMs);
            h.advance(d.moreQuotaMs - 1);
            expect((await h.limiter.peek(policy, 'k')).remaining).toBeLessThanOrEqual(d.remaining);
            h.advance(1);
            expect((await h.limiter.peek(policy, 'k')).remaining).toBeGreaterThan(d.remaining);
          },
        ),
        { numRuns: 300 },
      );
    },
  );
});
