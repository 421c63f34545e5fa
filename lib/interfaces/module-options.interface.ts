import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { RateLimitPolicy } from './policy.interface';

/** Which rate-limit response headers to send. */
export type RateLimitHeadersMode = 'ietf' | 'legacy' | 'both' | 'none';

/** What a request gets when the store errors or misses its deadline. */
export type RateLimitStoreErrorMode = 'fail-open' | 'fail-closed';

/**
 * Options of {@link RateLimitModule.forRoot}.
 * @example RateLimitModule.forRoot({ redis: process.env.REDIS_URL, defaultPolicy: { algorithm: 'gcra', limit: 100, window: '1m' } })
 */
export interface RateLimitModuleOptions {
  /**
   * Redis store: a URL, ioredis options, or a `Redis` / `Cluster` you created (never closed by us).
   * Absent: the in-process memory store (one instance only).
   */
  redis?: string | Redis | Cluster | RedisOptions;
  /**
   * Every key starts with `<prefix>:`; give apps sharing a Redis different prefixes.
   * @default 'rl'
   */
  prefix?: string;
  /** Applied to routes without `@RateLimit`. None: such routes are not limited. */
  defaultPolicy?: RateLimitPolicy | RateLimitPolicy[];
  /**
   * Response headers: IETF draft-10 `RateLimit` / `RateLimit-Policy`, legacy `X-RateLimit-*`, both, or none.
   * @default 'ietf'
   */
  headers?: RateLimitHeadersMode;
  /**
   * When the store fails or is too slow: let the request through, or reject it (HTTP 503).
   * @default 'fail-open'
   */
  onStoreError?: RateLimitStoreErrorMode;
  /**
   * Deadline for one decision against the store, in ms.
   * @default 100
   */
  storeTimeoutMs?: number;
  /**
   * Register {@link RateLimitGuard} as a global `APP_GUARD`.
   * @default true
   */
  registerGuard?: boolean;
  /**
   * `'shadow'` applies to every policy: decide and report, never reject.
   * @default 'enforce'
   */
  mode?: 'enforce' | 'shadow';
  /** Memory store tuning. */
  memory?: {
    /**
     * Most tracker states kept; least recently used are evicted past it.
     * @default 100_000
     */
    maxKeys?: number;
  };
  /**
   * IPv6 clients are grouped by this prefix length (one /64 is one subscriber).
   * @default 64
   */
  ipv6Subnet?: number;
  /** Message of the 429 response body. @default 'Too Many Requests' */
  errorMessage?: string;
}
