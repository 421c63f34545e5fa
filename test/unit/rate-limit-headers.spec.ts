import { parseList } from 'structured-headers';
import { headerProfile, type DecidedPolicy } from '../../lib/http/header-profiles';
import { mostRestrictive, policyMember, retryAfterSeconds, writeRateLimitHeaders } from '../../lib/http/rate-limit-headers';
import type { RateLimitDecision } from '../../lib';

const decision = (over: Partial<RateLimitDecision>): RateLimitDecision => ({
  allowed: true,
  policy: 'p',
  limit: 10,
  remaining: 5,
  resetMs: 0,
  moreQuotaMs: 0,
  retryAfterMs: 0,
  ...over,
});

const RATE = { name: 'fixed-window', usesBurst: false } as const;
/** The policy behind a decision, as the header profiles read it. */
const fixedWindow: DecidedPolicy = { algorithm: { name: 'fixed-window' }, cost: 1, params: { limit: 10, windowMs: 1_000 } };
const BUCKET = { name: 'token-bucket', usesBurst: true } as const;

/** A list field's members through the RFC 9651 parser: name and parameters. */
const members = (field: string) => parseList(field).map(([name, params]) => ({ name, ...Object.fromEntries(params) }));

describe('RateLimit-Policy members', () => {
  it('quota per window in whole seconds', () => {
    expect(members(policyMember('default', { limit: 100, windowMs: 60_000, burst: 100 }, RATE))).toEqual([
      { name: 'default', q: 100, w: 60 },
    ]);
  });

  it('a window that is not whole seconds is stated over whole windows, with the same rate', () => {
    const member = (limit: number, windowMs: number) => members(policyMember('p', { limit, windowMs, burst: limit }, RATE))[0];
    expect(member(5, 250)).toEqual({ name: 'p', q: 20, w: 1 });
    expect(member(3, 700)).toEqual({ name: 'p', q: 30, w: 7 });
    expect(member(1, 1_500)).toEqual({ name: 'p', q: 2, w: 3 });
    expect(member(5, 1_500)).toEqual({ name: 'p', q: 10, w: 3 });
    expect(member(7, 60_001)).toEqual({ name: 'p', q: 7_000, w: 60_001 });
  });

  it('bucket algorithms advertise the burst and the time to refill it', () => {
    expect(members(policyMember('tb', { limit: 5, windowMs: 10_000, burst: 10 }, BUCKET))).toEqual([{ name: 'tb', q: 10, w: 20 }]);
    expect(members(policyMember('tb', { limit: 5, windowMs: 10_000, burst: 5 }, BUCKET))).toEqual([{ name: 'tb', q: 5, w: 10 }]);
    // burst is ignored by non-bucket algorithms
    expect(members(policyMember('fw', { limit: 5, windowMs: 10_000, burst: 10 }, RATE))).toEqual([{ name: 'fw', q: 5, w: 10 }]);
  });

  it('a bucket refilled in a time that is not whole seconds is scaled the same way', () => {
    // 10 per second, burst 1: one token every 100 ms
    expect(members(policyMember('g', { limit: 10, windowMs: 1_000, burst: 1 }, BUCKET))).toEqual([{ name: 'g', q: 10, w: 1 }]);
    // 2 per 3 s, burst 3: refilled in 4.5 s
    expect(members(policyMember('g', { limit: 2, windowMs: 3_000, burst: 3 }, BUCKET))).toEqual([{ name: 'g', q: 6, w: 9 }]);
  });

  it('concurrency states concurrent requests, with no window', () => {
    const member = policyMember('c', { limit: 2, windowMs: 30_000, burst: 2 }, { name: 'concurrency', usesBurst: false });
    expect(members(member)).toEqual([{ name: 'c', q: 2, qu: 'concurrent-requests' }]);
  });
});

describe('writeRateLimitHeaders', () => {
  const write = (mode: 'ietf' | 'legacy' | 'both', decisions: RateLimitDecision[], profile = headerProfile()) => {
    const headers: Record<string, string> = {};
    writeRateLimitHeaders(
      { setHeader: (name, value) => (headers[name] = value) },
      { mode, profile, policyHeader: '"a";q=10;w=1, "b";q=10;w=1', decisions, policies: decisions.map(() => fixedWindow) },
    );
    return headers;
  };

  it('a decision of the store-error fallback has no RateLimit member, and its policy stays', () => {
    const headers = write('both', [
      decision({ policy: 'a', remaining: 10, reason: 'store-unavailable' }),
      decision({ policy: 'b', remaining: 4, resetMs: 2_000 }),
    ]);
    expect(members(headers['RateLimit-Policy']).map((m) => m.name)).toEqual(['a', 'b']);
    expect(members(headers['RateLimit'])).toEqual([{ name: 'b', r: 4, t: expect.any(Number) }]);
    expect(headers['X-RateLimit-Remaining']).toBe('4');
  });

  it('with only fallback decisions, no RateLimit and no legacy headers', () => {
    const headers = write('both', [
      decision({ policy: 'a', reason: 'store-unavailable' }),
      decision({ policy: 'b', reason: 'store-unavailable' }),
    ]);
    expect(Object.keys(headers)).toEqual(['RateLimit-Policy']);
  });

  it('on a rejection, draft-11 lists only the violated policies and draft-10 every policy', () => {
    const decisions = [
      decision({ policy: 'a', allowed: false, remaining: 0, resetMs: 8_000, moreQuotaMs: 8_000, retryAfterMs: 8_000 }),
      decision({ policy: 'b', remaining: 997, resetMs: 8_858_000, moreQuotaMs: 8_858_000 }),
    ];
    expect(write('ietf', decisions)['RateLimit']).toBe('"a";r=0;t=8');
    expect(write('ietf', decisions, headerProfile('draft-10'))['RateLimit']).toBe('"a";r=0;t=8, "b";r=997;t=8858');
  });

  it('a shadow policy that would have rejected is no violation: every policy is listed', () => {
    const decisions = [
      decision({ policy: 'a', allowed: false, remaining: 0, resetMs: 8_000, retryAfterMs: 8_000, reason: 'shadow' }),
      decision({ policy: 'b', remaining: 4, resetMs: 2_000 }),
    ];
    expect(members(write('ietf', decisions)['RateLimit']).map((m) => m.name)).toEqual(['a', 'b']);
  });
});

describe('RateLimit members under draft-10', () => {
  const quotaMember = (d: RateLimitDecision) => headerProfile('draft-10').quotaMember(d, fixedWindow);

  it('t is the ceiling of the time until additional quota, not of the full reset', () => {
    expect(quotaMember(decision({ remaining: 3, resetMs: 9_000, moreQuotaMs: 1_001 }))).toBe('"p";r=3;t=2');
    expect(quotaMember(decision({ remaining: 10, resetMs: 0, moreQuotaMs: 0 }))).toBe('"p";r=10;t=0');
  });

  it('t is the time until additional quota when rejected too, whatever the retry of this request', () => {
    const rejected = { allowed: false, remaining: 1, resetMs: 60_000, moreQuotaMs: 2_500 };
    expect(quotaMember(decision({ ...rejected, retryAfterMs: 7_000 }))).toBe('"p";r=1;t=3');
    expect(quotaMember(decision({ ...rejected, retryAfterMs: Infinity }))).toBe('"p";r=1;t=3');
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
