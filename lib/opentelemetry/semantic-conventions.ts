/*
 * Names of the rate limiter's OpenTelemetry signals. OpenTelemetry's semantic conventions define rate
 * limiting only for ASP.NET Core (`aspnetcore.rate_limiting.*`, with results naming .NET limiter kinds), so
 * these follow the conventions' style in a namespace of their own: lower-case dotted names, `snake_case`
 * words, UCUM units, and attributes of bounded cardinality (policy names and outcomes, never trackers or keys).
 */

/** Counter, `{decision}`: one per policy per decision; attributes `ratelimit.policy`, `ratelimit.outcome`. */
export const METRIC_RATELIMIT_DECISIONS = 'ratelimit.decisions';
/** Histogram, `s`: latency of each decision (store round trip included); attribute `ratelimit.outcome`. */
export const METRIC_RATELIMIT_DECISION_DURATION = 'ratelimit.decision.duration';
/** Counter, `{decision}`: allowed decisions near their policy's limit; attribute `ratelimit.policy`. */
export const METRIC_RATELIMIT_NEAR_LIMIT = 'ratelimit.near_limit';
/** Counter, `{error}`: store failures and missed deadlines; attribute `error.type`. */
export const METRIC_RATELIMIT_STORE_ERRORS = 'ratelimit.store.errors';
/**
 * UpDownCounter, `{class}`: the classes the load shedder refuses (0 none, 1 `sheddable`, 2 `sheddable` and
 * `default`); moves by one per change.
 */
export const METRIC_RATELIMIT_SHEDDING_LEVEL = 'ratelimit.shedding.level';

/**
 * Gauge, `{request}`: each adaptive limit's current value (the requests in flight it admits); attributes
 * `ratelimit.policy`, `ratelimit.route`.
 */
export const METRIC_RATELIMIT_ADAPTIVE_LIMIT = 'ratelimit.adaptive.limit';
/** Gauge, `{request}`: the requests in flight under each adaptive limit; attributes `ratelimit.policy`, `ratelimit.route`. */
export const METRIC_RATELIMIT_ADAPTIVE_INFLIGHT = 'ratelimit.adaptive.inflight';

/** The policy's `name`. */
export const ATTR_RATELIMIT_POLICY = 'ratelimit.policy';
/** How the decision came about: a `RateLimitOutcome` (`allowed`, `rejected`, `shadow-rejected`, `fail-open`, …). */
export const ATTR_RATELIMIT_OUTCOME = 'ratelimit.outcome';
/** The policy's limit (its burst capacity for bucket algorithms). Spans only. */
export const ATTR_RATELIMIT_LIMIT = 'ratelimit.limit';
/** Whole units left after the decision. Spans only. */
export const ATTR_RATELIMIT_REMAINING = 'ratelimit.remaining';
/** Ms until the same request would be allowed: 0 when allowed, absent when it never can be. Spans only. */
export const ATTR_RATELIMIT_RETRY_AFTER_MS = 'ratelimit.retry_after_ms';
/** Why the decision is not the plain counter's: `blocked`, `cost-exceeds-capacity`, … Spans only. */
export const ATTR_RATELIMIT_REASON = 'ratelimit.reason';
/** Where an adaptive limit applies: `<Controller>.<handler>` of a route, or `RateLimiterService.admit`. */
export const ATTR_RATELIMIT_ROUTE = 'ratelimit.route';
/** OpenTelemetry's own `error.type`: the store error's `name`. */
export const ATTR_ERROR_TYPE = 'error.type';

/** Span event: one per policy that rejected (enforced, shadow or fallback), with that policy's attributes. */
export const EVENT_RATELIMIT_REJECTED = 'ratelimit.rejected';
/** Span event: one per policy whose allowed decision is near its limit. */
export const EVENT_RATELIMIT_NEAR_LIMIT = 'ratelimit.near_limit';
