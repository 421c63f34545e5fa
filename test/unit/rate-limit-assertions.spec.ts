import { expectNotRateLimited, expectRateLimited, readRateLimitHeaders } from '../../lib/testing';

describe('testing-kit assertions', () => {
  it('read a fetch Response (Headers.get) and a light-my-request response (statusCode)', () => {
    const fetched = new Response(null, {
      status: 429,
      headers: {
        'Retry-After': '5',
        'RateLimit-Policy': '"per-ip";q=10;w=60, "per-user";q=100;w=3600',
        RateLimit: '"per-ip";r=0;t=5, "per-user";r=42;t=1800',
      },
    });
    expect(expectRateLimited(fetched, { retryAfter: 5, policy: 'per-ip', remaining: 0 })).toEqual({
      status: 429,
      retryAfter: 5,
      quotas: [
        { policy: 'per-ip', remaining: 0, resetSeconds: 5 },
        { policy: 'per-user', remaining: 42, resetSeconds: 1800 },
      ],
      policies: [
        { policy: 'per-ip', quota: 10, windowSeconds: 60 },
        { policy: 'per-user', quota: 100, windowSeconds: 3600 },
      ],
      legacy: undefined,
    });
    expect(() => expectRateLimited(fetched, { remaining: 0 })).toThrow(
      'expectRateLimited: the RateLimit header has 2 policies: say which with { policy }',
    );

    const injected = { statusCode: 200, headers: { 'x-ratelimit-limit': '3', 'x-ratelimit-remaining': 2, 'x-ratelimit-reset': '7' } };
    expect(expectNotRateLimited(injected, { remaining: 2 }).legacy).toEqual({ limit: 3, remaining: 2, resetSeconds: 7 });
  });

  it('a 429 without Retry-After passes only when none is expected (the cost can never fit)', () => {
    const never = { status: 429, headers: { ratelimit: '"default";r=3;t=60' } };
    expect(() => expectRateLimited(never)).toThrow(
      'expectRateLimited: expected a Retry-After header, there is none (status 429; RateLimit: "default";r=3;t=60).',
    );
    expect(expectRateLimited(never, { retryAfter: null, remaining: 3 }).retryAfter).toBeUndefined();
  });

  it('a 429 from something else than the rate limiter (no rate-limit headers) is not accepted', () => {
    expect(() => expectRateLimited({ status: 429, headers: { 'retry-after': '1' } })).toThrow(
      "expectRateLimited: expected RateLimit or X-RateLimit-* headers, there are none (is the module's `headers` option 'none'?) (status 429; Retry-After: 1).",
    );
  });

  it('names with escaped quotes and a response without a status', () => {
    expect(readRateLimitHeaders({ status: 200, headers: { RateLimit: '"say \\"hi\\"";r=1;t=2' } }).quotas).toEqual([
      { policy: 'say "hi"', remaining: 1, resetSeconds: 2 },
    ]);
    expect(() => readRateLimitHeaders({ headers: {} })).toThrow('readRateLimitHeaders: the response has no numeric status or statusCode.');
  });
});
