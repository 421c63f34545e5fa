/**
 * The draft-11 profile's `t`, the effective window of `r` (draft-ietf-httpapi-ratelimit-headers-11 §4.1.2):
 * exact members per algorithm on the memory twin, each checked against what the twin then does (within `t`
 * the client gets no more than `r`, or the quota it describes is whole again exactly at `t`).
 */
import { parseList } from 'structured-headers';
import { RateLimitConfigError, type RateLimitDecision } from '../../lib';
import { headerProfile, type DecidedPolicy } from '../../lib/http/header-profiles';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { validateModuleOptions } from '../../lib/policy/validate-options';
import { memoryHarness, T0 } from '../support/memory-harness';

const S = 1000;
const draft11 = headerProfile('draft-11');

/** The draft-11 `RateLimit` member of `d`, read back through the RFC 9651 parser. */
function member(d: RateLimitDecision, policy: RateLimitPolicy, cost = 1): Record<string, unknown> {
  const decided: DecidedPolicy = {
    algorithm: { name: policy.algorithm },
    cost,
    params: { limit: policy.limit as number, windowMs: policy.window as number },
  };
  const [[name, params]] = parseList(draft11.quotaMember(d, decided));
  return { name, ...Object.fromEntries(params) };
}

describe('draft-11 t: the effective window of r, per algorithm', () => {
  it('token-bucket 1/s burst 10 after 3 requests: r=7;t=3, full again at 3 s', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: S, burst: 10, name: 'tb' };
    await h.limiter.consume(policy, 'k');
    await h.limiter.consume(policy, 'k');
    const d = await h.limiter.consume(policy, 'k');
    expect(member(d, policy)).toEqual({ name: 'tb', r: 7, t: 3 });
    h.advance(3 * S - 1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(9);
    h.advance(1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(10);
  });

  it.each(['gcra', 'leaky-bucket'] as const)('%s: until the bucket is full (empty) again', async (algorithm) => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm, limit: 2, window: S, burst: 6, name: 'b', delay: false };
    for (let i = 0; i < 4; i++) await h.limiter.consume(policy, 'k');
    const d = await h.limiter.consume(policy, 'k');
    // 5 units taken at 2 per second: 2.5 s until the bucket holds its 6 again.
    expect(member(d, policy)).toEqual({ name: 'b', r: 1, t: 3 });
    h.advance(2_500);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(6);
  });

  it('a bucket with r below the cost: until a request of that cost fits', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: S, burst: 4, name: 'tb' };
    const d = await h.limiter.consume(policy, 'k', { cost: 3 });
    expect(member(d, policy, 3)).toEqual({ name: 'tb', r: 1, t: 2 });
    h.advance(2 * S - 1);
    expect((await h.limiter.consume(policy, 'k', { cost: 3 })).allowed).toBe(false);
    h.advance(1);
    expect((await h.limiter.consume(policy, 'k', { cost: 3 })).allowed).toBe(true);
  });

  it("a bucket's rejection: until the request fits, which is its Retry-After", async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: S, burst: 3, name: 'tb' };
    await h.limiter.consume(policy, 'k', { cost: 2 });
    const d = await h.limiter.consume(policy, 'k', { cost: 3 });
    expect(d).toMatchObject({ allowed: false, remaining: 1, retryAfterMs: 2 * S, resetMs: 2 * S });
    expect(member(d, policy, 3)).toEqual({ name: 'tb', r: 1, t: 2 });
    // A request that can never fit has no wait: the window is until the bucket is full.
    const never = await h.limiter.consume(policy, 'k', { cost: 4 });
    expect(member(never, policy, 4)).toEqual({ name: 'tb', r: 1, t: 2 });
  });

  it('fixed-window: the window end; nothing comes back before it', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 3, window: 10 * S, name: 'fw' };
    await h.limiter.consume(policy, 'k');
    h.advance(2_500);
    const d = await h.limiter.consume(policy, 'k');
    expect(member(d, policy)).toEqual({ name: 'fw', r: 1, t: 8 });
    h.advance(7_500 - 1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(1);
    h.advance(1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(3);
  });

  it('sliding-log: until the oldest counted request leaves the window', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 5, window: 10 * S, name: 'sl' };
    await h.limiter.consume(policy, 'k');
    h.at(T0 + 3 * S);
    await h.limiter.consume(policy, 'k');
    h.at(T0 + 6 * S);
    const d = await h.limiter.consume(policy, 'k');
    expect(member(d, policy)).toEqual({ name: 'sl', r: 2, t: 4 });
    h.at(T0 + 10 * S - 1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(2);
  });

  it('sliding-window: until the estimate has let one unit go', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'sliding-window', limit: 5, window: 10 * S, name: 'sw' };
    for (let i = 0; i < 5; i++) await h.limiter.consume(policy, 'k');
    h.at(T0 + 12 * S);
    const d = await h.limiter.consume(policy, 'k');
    expect(member(d, policy)).toEqual({ name: 'sw', r: 0, t: 2 });
    h.advance(2 * S - 1);
    expect((await h.limiter.peek(policy, 'k')).remaining).toBe(0);
  });

  it('concurrency: no t (its quota is not spent over time)', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'concurrency', limit: 2, window: 30 * S, name: 'c' };
    const d = await h.limiter.consume(policy, 'k');
    expect(member(d, policy)).toEqual({ name: 'c', r: 1 });
  });

  it('a lockout: until it ends, never beyond the Retry-After of the rejection', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: S, burst: 1, blockFor: 5 * S, name: 'tb' };
    await h.limiter.consume(policy, 'k');
    const d = await h.limiter.consume(policy, 'k');
    expect(d).toMatchObject({ allowed: false, retryAfterMs: 5 * S });
    expect(member(d, policy)).toEqual({ name: 'tb', r: 0, t: 5 });
  });
});

describe('draft-10 t: until additional quota is made available', () => {
  it('token-bucket 1/s burst 10 after 3 requests: r=7;t=1', async () => {
    const h = memoryHarness();
    const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: S, burst: 10, name: 'tb' };
    await h.limiter.consume(policy, 'k');
    await h.limiter.consume(policy, 'k');
    const d = await h.limiter.consume(policy, 'k');
    const decided: DecidedPolicy = { algorithm: { name: 'token-bucket' }, cost: 1, params: { limit: 1, windowMs: S } };
    expect(headerProfile('draft-10').quotaMember(d, decided)).toBe('"tb";r=7;t=1');
  });
});

describe('module option headerProfile', () => {
  it('is checked at bootstrap: the error names the field, the value and the profiles there are', () => {
    expect(() => validateModuleOptions({ headerProfile: 'draft-9' as never })).toThrow(
      new RateLimitConfigError(`RateLimitModule options: headerProfile: "draft-9" must be one of 'draft-11', 'draft-10'.`),
    );
    expect(() => validateModuleOptions({ headerProfile: 'draft-10' })).not.toThrow();
  });
});
