import type { ExecutionContext } from '@nestjs/common';

/** The built-in algorithms, in the order docs/algorithms.md's table gives them. */
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
 * A `fixed-window` window aligned to the calendar of a time zone: each day from local midnight, each week
 * from local midnight of `weekStartsOn`, each month from local midnight of the 1st. A period lasts what it
 * lasts there (23 or 25 hours across a DST change, 28 to 31 days), and the quota comes back in full at its
 * end, on the store's clock.
 * @example { calendar: 'month' } // 1st of each month, 00:00 UTC
 * @example { calendar: 'day', timeZone: 'Europe/Paris' }
 * @example (ctx) => ({ calendar: 'day', timeZone: ctx.switchToHttp().getRequest().user.timeZone })
 */
export interface CalendarWindow {
  /** The period: a local day, week or month. */
  calendar: 'day' | 'week' | 'month';
  /**
   * An IANA time zone name (`'America/New_York'`), as `Intl.DateTimeFormat` accepts it.
   * @default 'UTC'
   */
  timeZone?: string;
  /**
   * The first day of a week: 0 Sunday, 1 Monday … 6 Saturday. Read for `calendar: 'week'` only.
   * @default 1
   */
  weekStartsOn?: 0 | 1 | 2 | 3 | 4 | 5 | 6;
}

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
   * `fixed-window` also takes a {@link CalendarWindow}: quotas per local day, week or month.
   */
  window: ContextValue<Duration | CalendarWindow>;
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
   * Whose quota this request draws from: `'ip'` (tracker `ip:<address>`), `'user'` (`user:<id>`), or a
   * function whose value `V` is the tracker `by:V`. A function's value lives in its own namespace, so a
   * client that sends `ip:127.0.0.1` as its API key counts under `by:ip:127.0.0.1`, never under the client
   * at 127.0.0.1. `RateLimiterService` keys name the same trackers: `'ip:127.0.0.1'`, `'user:42'`, and
   * `'acme'` (or `'by:acme'`) for a function returning `'acme'`.
   * @default 'ip'
   * @example by: (ctx) => ctx.switchToHttp().getRequest().headers['x-api-key'] // undefined → the client IP
   */
  by?: RateLimitTracker;
  /**
   * Lockout: once this policy rejects a tracker, keep rejecting it for this long from that moment (with
   * `escalate`, the first lockout's length).
   */
  blockFor?: Duration;
  /**
   * Escalating lockouts: a repeat offender waits longer each time. Needs `blockFor`.
   * @example { blockFor: '1m', escalate: { max: '1h', forgiveAfter: '1d' } } // 1, 2, 4 … 32, 60, 60 … minutes
   */
  escalate?: RateLimitEscalation;
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
  /**
   * Reserve, then settle: `cost` is an estimate charged before the handler, and once the handler has settled
   * and the response is over this function returns the actual cost (LLM tokens, rows, bytes), given
   * `result`, what the handler returned (`undefined` when it threw, or on a GraphQL call). The difference is
   * given back, or charged (an overdraft, at most the policy's capacity, may leave the quota below zero so
   * the next requests wait it out), in one atomic store call. A function that throws, returns anything but
   * a whole number ≥ 0, or has not settled within `userFunctionTimeoutMs` leaves the estimate charged (and
   * is logged). Not with `countOnly` or `concurrency`; WebSocket and microservice calls have no end, so
   * their estimate stays. Ignored by {@link RateLimiterService} calls (use `reserve()` there).
   * @example { algorithm: 'token-bucket', limit: 2_000, window: '1m', cost: (ctx) => body(ctx).maxTokens, settle: (ctx, r) => (r as Completion).usage.totalTokens }
   */
  settle?: RateLimitSettle;
  /**
   * What one unit of `limit` is, as the `RateLimit-Policy` header states it (`qu`, draft-ietf-httpapi-ratelimit-headers):
   * `'content-bytes'` when `cost` counts bytes. `'concurrent-requests'` is what `concurrency` policies state
   * (and the only unit they take).
   * @default 'requests' (not sent, as it is the draft's default)
   */
  quotaUnit?: RateLimitQuotaUnit;
  /**
   * For one hot key (a global limit every request shares), with the Redis store: each instance takes this many
   * units from Redis at a time and spends them in-process, giving back what is left after a second (a
   * `fixed-window`, when the window ends). Redis then sees one call per slice instead of one per request. Every
   * unit is charged in Redis before it is spent: a fixed window admits at most `limit`; `sliding-window`,
   * `token-bucket` and `gcra` at most (instances × `slice`) above their limit in any span. Headers report what
   * Redis had left at the last grant plus this instance's slice. A `reset()` made by another instance reaches a
   * slice when it is next refilled (a `deny()` reaches every instance within 1 s, slices or not). Whole number from 1 to the policy's capacity; not with `countOnly`,
   * `settle` or `blockFor`. The memory store ignores it (it decides in-process already).
   * @example { algorithm: 'token-bucket', limit: 20_000, window: '1s', by: () => 'api', slice: 50 } // 4 instances: ≤ 200 over (1 %)
   */
  slice?: number;
  /**
   * Shares of the capacity (`limit`, or `burst` for the bucket algorithms) kept for a criticality and those
   * above it (`@RateLimitPriority`, the module's `priority`): a request of a lower criticality must leave them
   * untaken. `{ critical: 0.2 }` on a limit of 100: `'default'` and `'sheddable'` requests get 80, `'critical'`
   * ones all 100. `{ critical: 0.2, default: 0.1 }`: `'sheddable'` 70, `'default'` 80, `'critical'` 100. Each
   * share in [0, 1), together below 1; the units held are the share of the capacity rounded to the nearest
   * unit (at least 1 for a share above 0, never the whole capacity). Checked atomically with the counter; only
   * the request's cost is charged. A request refused only by a reserve gets 503 with `Retry-After` (problem type
   * `temporary-reduced-capacity`), not 429, and the decision's reason `'reserved'`; `remaining` is what its
   * criticality may still take. `RateLimiterService` calls pass their criticality as `{ priority }` (default
   * `'default'`). Every algorithm but `'adaptive'` (which has `adaptive.partitions`); not with `slice`.
   * @example { algorithm: 'sliding-window', limit: 100, window: '1m', reserve: { critical: 0.2 } }
   */
  reserve?: RateLimitReserve;
}

/** Policy `reserve`: the share of the capacity kept for each criticality and those above it. */
export interface RateLimitReserve {
  /** Share kept for `'critical'` requests: `'default'` and `'sheddable'` ones leave it untaken. */
  critical?: number;
  /** Share kept for `'default'` requests and above: `'sheddable'` ones leave it untaken too. */
  default?: number;
}

/** A `settle` function: the actual cost of a call, given what its handler returned. */
export type RateLimitSettle = (context: ExecutionContext, result: unknown) => number | Promise<number>;

/** The quota units the RateLimit header fields draft registers (its `qu` parameter). */
export type RateLimitQuotaUnit = 'requests' | 'content-bytes' | 'concurrent-requests';

/**
 * How lockouts grow (policy `escalate`): the n-th lockout since the tracker was last forgiven lasts
 * `min(blockFor × factor^(n−1), max)`, and the count starts over once `forgiveAfter` has passed since the end
 * of the last lockout with no new one. Kept with the lockout, in the same atomic decision.
 * @example { factor: 2, max: '1h', forgiveAfter: '1d' }
 */
export interface RateLimitEscalation {
  /**
   * Each lockout lasts this many times the one before: a whole number from 2 to 1000.
   * @default 2
   */
  factor?: number;
  /** Longest lockout; at least `blockFor`. */
  max: Duration;
  /** Quiet time after the end of a lockout after which the tracker's offences are forgotten. */
  forgiveAfter: Duration;
}

/** A skip predicate: `true` exempts the call. */
export type RateLimitSkipIf = (context: ExecutionContext) => boolean | Promise<boolean>;

/**
 * Some fields of a policy the route inherits (the module's `defaultPolicy`, or its class's `@RateLimit`),
 * named by `name`: `@RateLimit` keeps every field it does not set, and the other inherited policies keep
 * applying. A policy is read as an override when it lacks `algorithm`, `limit` or `window`.
 * @example @RateLimit({ name: 'burst', limit: 20 }) // the module's 'burst' policy, with limit 20
 */
export interface RateLimitPolicyOverride extends Partial<RateLimitPolicy> {
  /** The name of the inherited policy this changes. */
  name: string;
}
