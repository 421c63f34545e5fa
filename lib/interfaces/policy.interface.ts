import type { ExecutionContext } from '@nestjs/common';

/** The built-in algorithms, in the README's order; see its algorithms table. */
export const RATE_LIMIT_ALGORITHMS = [
  'fixed-window',
  'sliding-window',
  'sliding-log',
  'token-bucket',
  'gcra',
  'leaky-bucket',
  'concurrency',
] as const;

/** Names of the built-in algorithms. */
export type RateLimitAlgorithmName = (typeof RATE_LIMIT_ALGORITHMS)[number];

/**
 * A length of time: a number of milliseconds, or a string such as `'250ms'`, `'1s'`, `'1m'`, `'1h'`, `'1d'`.
 * @example '15m'
 */
export type Duration = number | `${number}${'ms' | 's' | 'm' | 'h' | 'd'}`;

/**
 * A value fixed in the policy, or computed per request (plan tiers, per-route costs). A promise that has not
 * settled within `userFunctionTimeoutMs` fails the request.
 */
export type ContextValue<T> = T | ((context: ExecutionContext) => T | Promise<T>);

/**
 * Whose quota a request draws from: the client IP (`'ip'`), the authenticated user (`'user'`, falling back
 * to the IP), or any string computed from the execution context (an API key, a tenant id, …); a function
 * returning `undefined` (or `''`) falls back to the client IP. A promise that has not settled within
 * `userFunctionTimeoutMs` fails the request.
 */
export type RateLimitTracker = 'ip' | 'user' | ((context: ExecutionContext) => string | undefined | Promise<string | undefined>);

/**
 * One rate-limiting rule. Field names are part of the public contract.
 * @example { algorithm: 'sliding-window', limit: 100, window: '1m' }
 */
export interface RateLimitPolicy {
  /** Which algorithm decides. */
  algorithm: RateLimitAlgorithmName;
  /** Requests (units) per window; for `concurrency`, simultaneous leases. Integer ≥ 1. */
  limit: ContextValue<number>;
  /**
   * Window length; for `concurrency`, how long a lease lives if it is never released. A route's lease is
   * released once its handler has settled and its response is over (a client that aborts does not free it
   * early); a handler still running after `window` has lost its lease, and another request may take it.
   */
  window: ContextValue<Duration>;
  /**
   * Policy name, used in keys and in the `RateLimit` headers; unique on a route.
   * @default 'default'
   */
  name?: string;
  /**
   * Units this request takes. Integer ≥ 1 (≥ 0 through the service, where 0 behaves like `peek`).
   * @default 1
   */
  cost?: ContextValue<number>;
  /**
   * Capacity for `token-bucket`, `gcra` and `leaky-bucket`: how many units may be taken at once.
   * @default limit
   */
  burst?: number;
  /**
   * Whose quota this request draws from.
   * @default 'ip'
   */
  by?: RateLimitTracker;
  /** Lockout: once this policy rejects a tracker, keep rejecting it for this long from that moment. */
  blockFor?: Duration;
  /**
   * Share one quota between every route (and service call) that names the same scope.
   * Without it, counters are per route (controller + handler).
   */
  scope?: string;
  /**
   * Count only some outcomes: the request is checked before the handler and refunded afterwards when its
   * outcome is not counted (status ≥ 400 or a thrown exception is `'failed'`).
   */
  countOnly?: 'failed' | 'succeeded';
  /**
   * `'shadow'` decides and reports as usual but never rejects: for rolling out a new limit safely.
   * @default 'enforce' (or the module's `mode`)
   */
  mode?: 'enforce' | 'shadow';
  /**
   * `leaky-bucket` only: hold an admitted request for its `delayMs` before the handler runs
   * (nginx `limit_req` without `nodelay`). `false` makes the bucket a pure meter.
   * @default true
   */
  delay?: boolean;
  /**
   * What this policy answers when the store fails or misses `storeTimeoutMs`; overrides the module's
   * `onStoreError`.
   */
  onStoreError?: 'fail-open' | 'fail-closed' | 'insurance';
  /**
   * When it returns (or resolves to) `true`, this request is not limited by this policy: nothing is checked
   * or charged, and the policy is left out of the headers. The route's other policies apply as usual. Bounded
   * by `userFunctionTimeoutMs` when it returns a promise. Ignored by {@link RateLimiterService} calls.
   * @example skipIf: (ctx) => ctx.switchToHttp().getRequest().user?.plan === 'enterprise'
   */
  skipIf?: RateLimitSkipIf;
}

/** A skip predicate: `true` exempts the call. */
export type RateLimitSkipIf = (context: ExecutionContext) => boolean | Promise<boolean>;
