/**
 * The public surface: what the README and docs/ document, nothing internal. Stores, the engine, the
 * algorithm classes and DI tokens used only inside are not exported; optional integrations live in their
 * subpaths (`nestjs-redis-ratelimit/testing`, `/prometheus`, `/terminus`, `/event-emitter`, `/opentelemetry`).
 */

// The module and its options.
export { RateLimitModule } from './rate-limit.module';
export { RATE_LIMIT_OPTIONS, type RateLimitOptionsFactory } from './rate-limit.module-definition';
export type {
  RateLimitModuleOptions,
  RateLimitHeadersMode,
  RateLimitStoreErrorMode,
  RateLimitHooks,
  RateLimitDecisionEvent,
  RateLimitContextType,
  RateLimitErrorMessage,
  RateLimitErrorFormat,
} from './interfaces/module-options.interface';
export type { RedisClient } from './stores/redis/redis.store';
export type {
  NodeRedisClientLike,
  NodeRedisClusterLike,
  NodeRedisScriptOptions,
  GlideClientLike,
  GlideScriptLike,
} from './interfaces/client-types';
export type { RateLimitClock } from './stores/memory/memory.store';

// Policies and decisions.
export { RATE_LIMIT_ALGORITHMS } from './interfaces/policy.interface';
export type {
  RateLimitPolicy,
  RateLimitPolicyOverride,
  RateLimitAlgorithmName,
  Duration,
  CalendarWindow,
  ContextValue,
  RateLimitTracker,
  RateLimitSkipIf,
  RateLimitSettle,
  RateLimitQuotaUnit,
  RateLimitEscalation,
  RateLimitReserve,
} from './interfaces/policy.interface';
export type { RateLimitDecision, RateLimitDecisionReason } from './interfaces/decision.interface';
export type {
  RateLimitCriticality,
  RateLimitAdaptivePolicy,
  RateLimitAdaptiveOptions,
  RateLimitAdaptiveStrategy,
  RateLimitAdaptiveOutcome,
  RateLimitAdmission,
  RateLimitLoadSheddingOptions,
  RateLimitSheddingLevel,
  RateLimitSheddingEvent,
  RateLimitPressure,
} from './interfaces/overload.interface';
export type {
  RateLimitOverride,
  RateLimitOverrideOptions,
  RateLimitOverrideEntry,
  RateLimitOverrideEvent,
} from './interfaces/override.interface';
export { parseDuration } from './policy/duration';
export { clientIpKey } from './http/client-ip';

// Routes: decorators and the guard.
export {
  RateLimit,
  SkipRateLimit,
  RateLimitPriority,
  RateLimitPolicies,
  RateLimitSkip,
  RateLimitPriorities,
  type RateLimitMetadata,
  type RateLimitMetadataDecorator,
} from './rate-limit.decorator';
export { RateLimitGuard } from './rate-limit.guard';

// Programmatic use: quotas, administration, outbound throttling.
export { RateLimiterService } from './rate-limiter.service';
export { RateLimitAdmin, type RateLimitDenial } from './rate-limit-admin.service';
export { RateLimitOutbound } from './rate-limit-outbound.service';
export type {
  ConsumeOptions,
  LeaseOptions,
  MultiDecision,
  AcquireOptions,
  WrapFetchOptions,
  RateLimitLease,
  PartnerPauseOptions,
} from './interfaces/service.interface';
export type { RateLimitReservation } from './service/reservation';
export { pauseAskedMs, type PartnerResponse, type PartnerHeaders } from './service/partner-response';

// Events.
export { RateLimitEvents, RATE_LIMIT_EVENTS } from './events/rate-limit-events';

// Rejections and errors.
export {
  RateLimitExceededException,
  RateLimitStoreUnavailableException,
  GraphqlRateLimitExceededException,
  RateLimitExceededProblemException,
  RateLimitStoreUnavailableProblemException,
  RateLimitOverloadedException,
  RateLimitOverloadedProblemException,
  GraphqlRateLimitOverloadedException,
  RATE_LIMIT_QUOTA_EXCEEDED_TYPE,
  RATE_LIMIT_TEMPORARY_REDUCED_CAPACITY_TYPE,
  PROBLEM_JSON_CONTENT_TYPE,
  type RateLimitExceededBody,
  type RateLimitGraphqlErrorExtensions,
  type RateLimitProblemDetails,
  type RateLimitStoreUnavailableProblemDetails,
  type RateLimitOverloadedBody,
  type RateLimitOverloadedProblemDetails,
  type RateLimitGraphqlOverloadedErrorExtensions,
} from './rate-limit.exception';
export type { RateLimitWsErrorPayload } from './contexts/ws.context';
export type { RateLimitRpcErrorPayload } from './contexts/rpc.context';
export { RateLimitConfigError } from './errors/rate-limit-config.error';
export { RateLimitStoreError } from './errors/rate-limit-store.error';
export { RateLimitWaitError, RateLimitShutdownError } from './errors/rate-limit-wait.error';
