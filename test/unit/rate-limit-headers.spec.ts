import { mostRestrictive, policyMember, quotaMember, retryAfterSeconds } from '../../lib/http/rate-limit-headers';
import type { RateLimitDecision } from '../../lib';

const decision = (over: Partial<RateLimitDecision>): RateLimitDecision => ({
  allowed: true,
  policy: 'p',
  limit: 10,
  remaining: 5,
  resetMs: 0,
  retryAfterMs: 0,
  ...over,
});

describe('RateLimit-Policy members', () => {
  it('quota per window in whole seconds', () => {
    expect(policyMember('default', { limit: 100, windowMs: 60_000, burst: 100 }, false)).toBe('"default";q=100;w=60');
  });

  it('rounds a window up to whole seconds, at least 1', () => {
    expect(policyMember('fast', { limit: 5, windowMs: 250, burst: 5 }, false)).toBe('"fast";q=5;w=1');
    expect(policyMember('odd', { limit: 5, windowMs: 1_500, burst: 5 }, false)).toBe('"odd";q=5;w=2');
  });

  it('bucket algorithms advertise the burst and the time to refill it', () => {
    expect(policyMember('tb', { limit: 5, windowMs: 10_000, burst: 10 }, true)).toBe('"tb";q=10;w=20');
    expect(policyMember('tb', { limit: 5, windowMs: 10_000, burst: 5 }, true)).toBe('"tb";q=5;w=10');
    // burst is ignored by non-bucket algorithms
    expect(policyMember('fw', { limit: 5, windowMs: 10_000, burst: 10 }, false)).toBe('"fw";q=5;w=10');
  });
});

describe('RateLimit members', () => {
  it('t is the ceiling of the full reset when allowed', () => {
    expect(quotaMember(decision({ remaining: 3, resetMs: 1_001 }))).toBe('"p";r=3;t=2');
    expect(quotaMember(decision({ remaining: 10, resetMs: 0 }))).toBe('"p";r=10;t=0');
  });

  it('t is the retry time when rejected, the reset when the retry is never', () => {
    expect(quotaMember(decision({ allowed: false, remaining: 0, resetMs: 60_000, retryAfterMs: 2_500 }))).toBe('"p";r=0;t=3');
    expect(quotaMember(decision({ allowed: false, remaining: 0, resetMs: 4_000, retryAfterMs: Infinity }))).toBe('"p";r=0;t=4');
  });
});

describe('Retry-After', () => {
  it('is the longest wait among rejecting decisions, rounded up', () => {
    expect(retryAfterSeconds([decision({ retryAfterMs: 200 }), decision({ retryAfterMs: 1_500 })])).toBe(2);
    expect(retryAfterSeconds([decision({ retryAfterMs: 1_000 })])).toBe(1);
  });

  it('is null when a decision can never be allowed', () => {
    expect(retryAfterSeconds([decision({ retryAfterMs: 1_000 }), decision({ retryAfterMs: Infinity })])).toBeNull();
  });
});

describe('mostRestrictive (legacy headers)', () => {
  it('prefers a rejection with the longest wait', () => {
    const worst = decision({ policy: 'b', allowed: false, remaining: 3, retryAfterMs: 9_000 });
    expect(
      mostRestrictive([decision({ policy: 'a', remaining: 0 }), decision({ policy: 'c', allowed: false, retryAfterMs: 1 }), worst]),
    ).toBe(worst);
  });

  it('otherwise the fewest units left, then the later reset', () => {
    const a = decision({ policy: 'a', remaining: 2, resetMs: 1_000 });
    const b = decision({ policy: 'b', remaining: 2, resetMs: 5_000 });
    expect(mostRestrictive([a, b, decision({ policy: 'c', remaining: 4 })])).toBe(b);
  });
});
