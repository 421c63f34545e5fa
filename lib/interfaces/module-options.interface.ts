import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { GlideClientLike, NodeRedisClientLike } from './client-types';
import type { RateLimitDecision } from './decision.interface';
import type { RateLimitOverrideEvent } from './override.interface';
import type { RateLimitCriticality, RateLimitLoadSheddingOptions, RateLimitSheddingEvent } from './overload.interface';
import type { ExecutionContext } from '@nestjs/common';
import type { RateLimitPolicy, RateLimitSkipIf } from './policy.interface';

/** Builds the message of a rejection from the call and every policy's decision. */
export type RateLimitErrorMessage = (context: ExecutionContext, decisions: readonly RateLimitDecision[]) => string;

/** The body of an HTTP 429: the JSON of `RateLimitExceededBody`, or RFC 9457 problem details. */
export type RateLimitErrorFormat = 'json' | 'problem+json';

/** Which rate-limit response headers to send. */
export type RateLimitHeadersMode = 'ietf' | 'legacy' | 'both' | 'none';

/**
 * The drafts of draft-ietf-httpapi-ratelimit-headers whose `RateLimit` field the module can send (module
 * option `headerProfile`); the first is the default.
 */
export const RATE_LIMIT_HEADER_PROFILES = ['draft-11', 'draft-10'] as const;

/** One draft of draft-ietf-httpapi-ratelimit-headers (see {@link RATE_LIMIT_HEADER_PROFILES}). */
export type RateLimitHeaderProfileName = (typeof RATE_LIMIT_HEADER_PROFILES)[number];

/**
 * What a request gets when the store errors or misses its deadline: decided by an in-process store holding a
 * share of the limit (`insurance`, the default: bounded, and a rejection is a 429 with `Retry-After`), allowed
 * whatever the limit (`fail-open`: unlimited while the store is away), or rejected with HTTP 503 (`fail-closed`).
 */
export type RateLimitStoreErrorMode = 'fail-open' | 'fail-closed' | 'insurance';

/**
 * Kinds of Nest execution context the guard can limit: controllers (`'http'`), GraphQL resolvers
 * (`'graphql'`), WebSocket gateways (`'ws'`) and microservice handlers (`'rpc'`).
 */
export type RateLimitContextType = (typeof RATE_LIMIT_CONTEXT_TYPES)[number];

/** Every kind of execution context the guard can limit (the default of `contexts`). */
export const RATE_LIMIT_CONTEXT_TYPES = ['http', 'graphql', 'ws', 'rpc'] as const;

/** Hooks called synchronously; keep them cheap (they never add a store round trip). */
export interface RateLimitHooks {
  /** Every decision of a request, after the store answered (or a fallback decided). */
  decision?: (event: RateLimitDecisionEvent) => void;
  /** Every store failure or missed deadline (logging is separate and rate-limited). */
  storeError?: (error: Error) => void;
  /**
   * Each allowed policy decision whose `remaining` is at or under `nearLimitRatio` of its limit (Envoy's
   * `near_limit`), after the `decision` hook of the same decision.
   */
  nearLimit?: (decision: RateLimitDecision) => void;
  /**
   * Each change to the runtime overrides this instance applies (`RateLimitAdmin.setOverride`): applied,
   * removed or expired. An administrative event, never one per request.
   */
  override?: (event: RateLimitOverrideEvent) => void;
  /** Each change of what the load shedder (`loadShedding`) refuses; at most one per sample interval. */
  shedding?: (event: RateLimitSheddingEvent) => void;
}

/** What {@link RateLimitHooks.decision} receives. */
export interface RateLimitDecisionEvent {
  /** Whether the request may proceed (shadow rejections do not count). */
  allowed: boolean;
  decisions: RateLimitDecision[];
  /** Decision latency, ms (store round trip included). */
  durationMs: number;
  /**
   * Set only when a fallback decided (some decision has `reason: 'store-unavailable'`): each policy's
   * `onStoreError`, in the order of `decisions`, telling fail-open, fail-closed and insurance apart.
   */
  fallbacks?: RateLimitStoreErrorMode[];
}

/**
 * Options of {@link RateLimitModule.forRoot}.
 * @example RateLimitModule.forRoot({ redis: process.env.REDIS_URL, defaultPolicy: { algorithm: 'gcra', limit: 100, window: '1m' } })
 */
export interface RateLimitModuleOptions {
  /**
   * Redis store: a URL, ioredis options, or a client you created and connected (never closed by us): an ioredis
   * `Redis` / `Cluster`, a node-redis 5 client / cluster (`createClient()` / `createCluster()` of `redis`), or a
   * Valkey GLIDE 2 `GlideClient` / `GlideClusterClient`. Absent: the in-process memory store (one instance only).
   * @example redis: await createClient({ url: process.env.REDIS_URL }).connect()
   */
  redis?: string | Redis | Cluster | RedisOptions | NodeRedisClientLike | GlideClientLike;
  /**
   * Every key starts with `<prefix>:`; give apps sharing a Redis different prefixes.
   * @default 'rl'
   */
  prefix?: string;
  /** Applied to routes without `@RateLimit`. None: such routes are not limited. */
  defaultPolicy?: RateLimitPolicy | RateLimitPolicy[];
  /**
   * Response headers: the IETF `RateLimit` / `RateLimit-Policy` fields (of the draft `headerProfile` names),
   * legacy `X-RateLimit-*`, both, or none.
   * @default 'ietf'
   */
  headers?: RateLimitHeadersMode;
  /**
   * Which draft of draft-ietf-httpapi-ratelimit-headers the `RateLimit` field follows. `'draft-11'`: `t` is
   * the effective window of `r`: `r` units spread over the next `t` seconds are always admitted, and a bucket
   * may admit more as it refills (a fixed window's end, a bucket's time to refill completely, a sliding
   * window's possibly beyond `w`; none for `concurrency`; defined per algorithm in docs/contexts.md), and a
   * rejection lists only the policies that rejected it, none with a `t` beyond `Retry-After`. `'draft-10'`: `t` is the seconds
   * until additional quota is made available, and every policy is listed (0.3's fields, byte for byte).
   * `RateLimit-Policy` and the legacy headers are the same under both.
   * @default 'draft-11'
   * @example headerProfile: 'draft-10' // clients written against draft-10's `t`
   */
  headerProfile?: RateLimitHeaderProfileName;
  /**
   * When the store fails or is too slow. `'insurance'` (the default): an in-process twin of each policy decides
   * with `insuranceShare` of its limit, so while the store is away each instance still enforces the policy
   * (bounded, never unlimited). A request the twin rejects gets the usual 429 (status, body, `Retry-After`
   * from the twin's wait; no `RateLimit` member for that policy, as the twin's count is not the client's
   * real quota), and its decision keeps `reason: 'store-unavailable'`. `'fail-open'`: every request passes
   * (unlimited while the store is away). `'fail-closed'`: every request is rejected with HTTP 503
   * (`RateLimitStoreUnavailableException`). A policy's own `onStoreError` overrides it.
   * @default 'insurance'
   * @example onStoreError: 'fail-closed' // a 503 rather than any request the store did not count
   */
  onStoreError?: RateLimitStoreErrorMode;
  /**
   * Deadline for one decision against the store, in ms.
   * @default 100
   */
  storeTimeoutMs?: number;
  /**
   * Deadline for a policy's own functions (`by`, `limit`, `window`, `cost`) when they return a promise, in
   * ms: one still pending after this long fails the request (HTTP 500, the error naming the route, the policy
   * and the function) and gives back what the request had already taken, so a function that never settles
   * cannot hang the request or hold another policy's lease. Generous by default, for lookups such as an API
   * key in a database.
   * @default 5000
   */
  userFunctionTimeoutMs?: number;
  /**
   * `insurance` fallback (the default `onStoreError`): the share of each limit one instance may grant while the
   * store is away (at least 1 request). By default, 1 / the instances that polled Redis in the last minute: every
   * instance records itself in Redis with its runtime-overrides poll (every 500 ms, in the same round trip), so
   * N instances grant about the limit between them, not N times it. Set, it is used as it is (1 for each
   * instance on its own); with the memory store there is no outage, and no share.
   * @default 1 / the instances live in the last minute (1 until the first poll has counted them)
   */
  insuranceShare?: number;
  /**
   * Answer repeated requests of a client that is already rejected from this instance until its
   * `retryAfter` has passed, without asking Redis (exact; see docs/guarantees-and-failure-modes.md). `false` turns it off.
   * @default { maxKeys: 10_000 }
   */
  hotKeyShedding?: false | { maxKeys?: number };
  /**
   * Decisions made in the same event-loop tick share one script call (decided one after the other, exactly as
   * separate calls would be): Node and Redis pay the per-command cost once per batch. On a Cluster, one call
   * per master (Redis 7.0 or later; older servers get a pipeline per master). Turn it off behind a proxy that
   * routes a call by its first key (Envoy, Twemproxy): a batch carries the keys of several trackers.
   * @default true
   */
  batchDecisions?: boolean;
  /** Least interval between two store-error log lines, ms. @default 10_000 */
  storeErrorLogIntervalMs?: number;
  /**
   * Default of `acquire()`'s `maxWaiters`: most calls of one process that may wait on one policy + key at
   * once, first come first served; past it `acquire` rejects at once (memory stays bounded).
   * @default 1000
   */
  maxWaiters?: number;
  /** Hooks for metrics and audit. */
  hooks?: RateLimitHooks;
  /**
   * An allowed policy decision is near its limit when its `remaining` is at most this share of the limit
   * (`floor(nearLimitRatio × limit)`; 0: only when the last unit was taken). Published as
   * {@link RateLimitHooks.nearLimit}, and only computed while something listens to it.
   * @default 0.1
   */
  nearLimitRatio?: number;
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
  /**
   * Send the headers of shadow policies (`mode: 'shadow'`, per policy or module-wide) too. Off, a shadow
   * policy measures silently: it is left out of `RateLimit-Policy`, `RateLimit` and `X-RateLimit-*`, so
   * that clients never slow down for a limit that is not enforced.
   * @default false
   */
  shadowHeaders?: boolean;
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
  /**
   * Message of the 429 response body: a string, or a function of the call and its decisions (every
   * policy's, in the route's order) returning one, called only when a call is rejected.
   * @default 'Too Many Requests'
   * @example errorMessage: (ctx, decisions) => `Slow down: ${decisions.find((d) => !d.allowed)?.policy} is exhausted.`
   */
  errorMessage?: string | RateLimitErrorMessage;
  /**
   * Body of a controller call's 429 (an `insurance` rejection's too) and `fail-closed` 503: `'json'`,
   * `{ statusCode, message, error, retryAfter }`; or `'problem+json'`, RFC 9457 problem details sent as
   * `application/problem+json`, of the IETF RateLimit draft's `quota-exceeded` type with its
   * `violated-policies` member, the message as `detail` (a 503 is `about:blank`). Headers are the same either
   * way. GraphQL, WebSocket and RPC calls keep their own error shapes.
   * @default 'json'
   */
  errorFormat?: RateLimitErrorFormat;
  /**
   * When it returns (or resolves to) `true`, the call is not limited by any policy: nothing is checked or
   * charged and no header is sent. Called only on limited routes; bounded by `userFunctionTimeoutMs` when it
   * returns a promise. A policy's own `skipIf` exempts the call from that policy only.
   * @example skipIf: (ctx) => ctx.switchToHttp().getRequest().headers['x-internal'] === process.env.INTERNAL_TOKEN
   */
  skipIf?: RateLimitSkipIf;
  /**
   * Controller calls whose `User-Agent` matches one of these are not limited (search-engine crawlers, uptime
   * probes). A call without a `User-Agent` never matches; GraphQL, WebSocket and RPC calls are not checked.
   * @example ignoreUserAgents: [/googlebot/i, /bingbot/i]
   */
  ignoreUserAgents?: RegExp[];
  /**
   * Which kinds of execution context the guard limits; calls of any other kind pass untouched. Each kind
   * has its own default tracker: HTTP and GraphQL the client IP of the HTTP request, WebSocket the
   * handshake address, RPC the message pattern (plus the data's `userId` or `id` when it has one).
   * @default ['http', 'graphql', 'ws', 'rpc']
   * @example contexts: ['http', 'graphql'] // leave gateways and microservices alone
   */
  contexts?: RateLimitContextType[];
  /**
   * Limit GraphQL subscriptions too (each subscribe call counts once). Off: subscription operations pass.
   * @default false
   */
  limitSubscriptions?: boolean;
  /**
   * The criticality of a call that has no `@RateLimitPriority` (the decorator wins where set): which share of
   * a partitioned adaptive limit it draws on. Synchronous; called only on routes with an adaptive policy. A
   * value other than the three criticalities counts as `'default'` (and is warned about, at most every 10 s).
   * @default every call is 'default'
   * @example priority: (ctx) => (ctx.switchToHttp().getRequest().headers['x-api-key']?.startsWith('test_') ? 'sheddable' : 'default')
   */
  priority?: (context: ExecutionContext) => RateLimitCriticality;
  /**
   * Refuse calls while this process is under pressure (event-loop delay, event-loop utilisation, and heap
   * use when `heapUsedRatio` is set), `'sheddable'` ones first, then `'default'` ones, never `'critical'` ones:
   * one class more per `sampleIntervalMs` under pressure, one class less per interval without. A refused call
   * gets 503 with `Retry-After`, decided before any store call. Absent: no shedding on process pressure.
   * @example loadShedding: { eventLoopDelayMs: 200, sampleIntervalMs: 500 }
   */
  loadShedding?: RateLimitLoadSheddingOptions;
}
