/**
 * A response from any HTTP test client: supertest (`status`, `headers`), Fastify's `inject` / light-my-request
 * (`statusCode`, `headers`) or `fetch` (`status`, `headers.get`).
 */
export interface RateLimitTestResponse {
  status?: number;
  statusCode?: number;
  headers: { get(name: string): string | null } | Record<string, unknown>;
}

/** One policy's member of the `RateLimit` header: `"<policy>";r=<remaining>;t=<seconds>`. */
export interface RateLimitQuotaHeader {
  policy: string;
  remaining: number;
  /**
   * The member's `t`: with the default `headerProfile` (draft-11) the effective window of `remaining`, with
   * `'draft-10'` the seconds until more quota; `undefined` where the member has no `t` (a concurrency policy
   * under draft-11).
   */
  resetSeconds: number | undefined;
}

/** One policy's member of the `RateLimit-Policy` header: `"<policy>";q=<quota>;w=<window seconds>`. */
export interface RateLimitPolicyHeader {
  policy: string;
  quota: number;
  windowSeconds: number;
}

/** The rate-limit side of a response, as {@link readRateLimitHeaders} reads it. */
export interface RateLimitResponseInfo {
  status: number;
  /** `Retry-After`, whole seconds; undefined when absent. */
  retryAfter: number | undefined;
  /** `RateLimit` members, in order (IETF headers). */
  quotas: RateLimitQuotaHeader[];
  /** `RateLimit-Policy` members, in order (IETF headers). */
  policies: RateLimitPolicyHeader[];
  /** `X-RateLimit-Limit` / `-Remaining` / `-Reset`, when the legacy headers are sent. */
  legacy: { limit: number; remaining: number; resetSeconds: number } | undefined;
}

/** What {@link expectNotRateLimited} checks besides the status. */
export interface RateLimitExpectation {
  /** The policy whose quota to check; it must appear in the `RateLimit` header. */
  policy?: string;
  /**
   * Units left: `policy`'s `r`, or with no `policy` the only `RateLimit` member (or `X-RateLimit-Remaining`).
   */
  remaining?: number;
}

/** What {@link expectRateLimited} checks besides the status. */
export interface RateLimitedExpectation extends RateLimitExpectation {
  /**
   * `Retry-After` in seconds; `null` when it must be absent (the cost can never fit).
   * @default a whole number of seconds must be present
   */
  retryAfter?: number | null;
}

/**
 * Asserts that `response` was rejected by the rate limiter: status 429, a `Retry-After` header (or the one
 * expected), rate-limit headers, and the expected policy / remaining units. Throws an `Error` saying what
 * differs; returns the headers it read. Works with any test runner.
 * @example expectRateLimited(await request(app.getHttpServer()).get('/cats'), { retryAfter: 60, policy: 'default', remaining: 0 });
 */
export function expectRateLimited(response: RateLimitTestResponse, expected: RateLimitedExpectation = {}): RateLimitResponseInfo {
  const info = readRateLimitHeaders(response);
  const fail = (what: string) => new Error(`expectRateLimited: ${what} (${describeResponse(info)}).`);
  if (info.status !== 429) throw fail(`expected status 429 Too Many Requests, got ${info.status}`);
  if (expected.retryAfter === null) {
    if (info.retryAfter !== undefined) throw fail(`expected no Retry-After header, got ${info.retryAfter}`);
  } else if (info.retryAfter === undefined) {
    throw fail(`expected a Retry-After header${expected.retryAfter === undefined ? '' : ` of ${expected.retryAfter}`}, there is none`);
  } else if (expected.retryAfter !== undefined && info.retryAfter !== expected.retryAfter) {
    throw fail(`expected Retry-After ${expected.retryAfter}, got ${info.retryAfter}`);
  }
  if (info.quotas.length === 0 && !info.legacy) {
    throw fail("expected RateLimit or X-RateLimit-* headers, there are none (is the module's `headers` option 'none'?)");
  }
  checkQuota(info, expected, fail);
  return info;
}

/**
 * Asserts that `response` was not rejected by the rate limiter (status other than 429), and when given,
 * the policy's remaining units. Throws an `Error` saying what differs; returns the headers it read.
 * @example expectNotRateLimited(res, { policy: 'default', remaining: 1 });
 */
export function expectNotRateLimited(response: RateLimitTestResponse, expected: RateLimitExpectation = {}): RateLimitResponseInfo {
  const info = readRateLimitHeaders(response);
  const fail = (what: string) => new Error(`expectNotRateLimited: ${what} (${describeResponse(info)}).`);
  if (info.status === 429)
    throw fail(
      `expected a response that is not rate-limited, got 429${info.retryAfter === undefined ? '' : ` with Retry-After ${info.retryAfter}`}`,
    );
  checkQuota(info, expected, fail);
  return info;
}

/** Reads the status and the rate-limit headers (`RateLimit`, `RateLimit-Policy`, `Retry-After`, `X-RateLimit-*`). */
export function readRateLimitHeaders(response: RateLimitTestResponse): RateLimitResponseInfo {
  const status = response.status ?? response.statusCode;
  if (typeof status !== 'number') throw new Error('readRateLimitHeaders: the response has no numeric status or statusCode.');
  const header = headerReader(response.headers);
  const retryAfter = header('retry-after');
  const limit = header('x-ratelimit-limit');
  const remaining = header('x-ratelimit-remaining');
  const reset = header('x-ratelimit-reset');
  return {
    status,
    retryAfter: retryAfter === undefined ? undefined : Number(retryAfter),
    quotas: members(header('ratelimit')).map(({ policy, params }) => ({ policy, remaining: params.r, resetSeconds: params.t })),
    policies: members(header('ratelimit-policy')).map(({ policy, params }) => ({ policy, quota: params.q, windowSeconds: params.w })),
    legacy:
      limit === undefined || remaining === undefined || reset === undefined
        ? undefined
        : { limit: Number(limit), remaining: Number(remaining), resetSeconds: Number(reset) },
  };
}

function checkQuota(info: RateLimitResponseInfo, expected: RateLimitExpectation, fail: (what: string) => Error): void {
  const { policy, remaining } = expected;
  if (policy === undefined && remaining === undefined) return;
  let actual: number | undefined;
  if (policy !== undefined) {
    const quota = info.quotas.find((q) => q.policy === policy);
    if (!quota) {
      const present = info.quotas.map((q) => `'${q.policy}'`).join(', ') || 'none';
      throw fail(`expected policy '${policy}' in the RateLimit header, found ${present}`);
    }
    actual = quota.remaining;
  } else if (info.quotas.length === 1) {
    actual = info.quotas[0].remaining;
  } else if (info.quotas.length > 1) {
    throw fail(`the RateLimit header has ${info.quotas.length} policies: say which with { policy }`);
  } else if (info.legacy) {
    actual = info.legacy.remaining;
  } else {
    throw fail('expected RateLimit or X-RateLimit-Remaining headers to check remaining, there are none');
  }
  if (remaining !== undefined && actual !== remaining) {
    throw fail(`expected ${remaining} remaining${policy === undefined ? '' : ` for policy '${policy}'`}, got ${actual}`);
  }
}

function headerReader(headers: RateLimitTestResponse['headers']): (name: string) => string | undefined {
  if (typeof headers.get === 'function') {
    const get = headers.get as (name: string) => string | null;
    return (name) => get.call(headers, name) ?? undefined;
  }
  const byName = new Map(Object.entries(headers).map(([key, value]) => [key.toLowerCase(), value]));
  return (name) => {
    const value = byName.get(name);
    return value === undefined || value === null ? undefined : Array.isArray(value) ? value.join(', ') : String(value);
  };
}

/** `"name";k=1;k2=2, "other";k=3` → members with numeric parameters. */
function members(value: string | undefined): Array<{ policy: string; params: Record<string, number> }> {
  if (value === undefined) return [];
  return [...value.matchAll(/"((?:[^"\\]|\\.)*)"((?:\s*;\s*[a-z][a-z0-9_.*-]*=[^,;]*)*)/g)].map(([, policy, rest]) => ({
    policy: policy.replace(/\\(.)/g, '$1'),
    params: Object.fromEntries(
      rest
        .split(';')
        .filter((p) => p.includes('='))
        .map((p) => {
          const [key, raw] = p.split('=');
          return [key.trim(), Number(raw.trim())];
        }),
    ),
  }));
}

function describeResponse(info: RateLimitResponseInfo): string {
  const parts = [`status ${info.status}`];
  if (info.retryAfter !== undefined) parts.push(`Retry-After: ${info.retryAfter}`);
  if (info.quotas.length > 0)
    parts.push(`RateLimit: ${info.quotas.map((q) => `"${q.policy}";r=${q.remaining};t=${q.resetSeconds}`).join(', ')}`);
  if (info.legacy) parts.push(`X-RateLimit-Remaining: ${info.legacy.remaining}`);
  if (parts.length === 1) parts.push('no rate-limit headers');
  return parts.join('; ');
}
