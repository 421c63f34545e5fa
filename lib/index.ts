export { RateLimitModule } from './rate-limit.module';
export { RATE_LIMIT_OPTIONS, type RateLimitModuleExtras, type RateLimitOptionsFactory } from './rate-limit.module-definition';
export {
  RateLimiterService,
  type ConsumeOptions,
  type MultiDecision,
  type AcquireOptions,
  type WrapFetchOptions,
  type RateLimitLease,
} from './rate-limiter.service';
export {
  DEFAULT_MAX_PAUSE_MS,
  pauseAskedMs,
  type PartnerResponse,
  type PartnerHeaders,
  type PartnerPauseOptions,
} from './service/partner-response';
export { DEFAULT_MAX_WAITERS } from './service/waiters';
export type { RateLimitReservation } from './service/reservation';
export { RateLimitEvents, RATE_LIMIT_EVENTS } from './events/rate-limit-events';
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
} from './interfaces/policy.interface';
export { RATE_LIMIT_ALGORITHMS } from './interfaces/policy.interface';
export { RATE_LIMIT_CONTEXT_TYPES } from './interfaces/module-options.interface';
export type { RateLimitDecision, RateLimitDecisionReason } from './interfaces/decision.interface';
export { RateLimitConfigError } from './errors/rate-limit-config.error';
export { RateLimitStoreError } from './errors/rate-limit-store.error';
export { RateLimitWaitError, RateLimitShutdownError } from './errors/rate-limit-wait.error';
export type { RateLimitClock } from './stores/memory/memory.store';
export type { RedisClient } from './stores/redis/redis.store';
export type {
  NodeRedisClientLike,
  NodeRedisClusterLike,
  NodeRedisScriptOptions,
  GlideClientLike,
  GlideScriptLike,
} from './interfaces/client-types';
export type { RateLimitStore, RateLimitCall, StoreDecision, StoreVerdict, DecisionMode, StoreFallback } from './stores/store.interface';
export { RateLimitDenyList, DENY_RECHECK_MS, type RateLimitDenial } from './pipeline/deny-list';
export * from './algorithms';
export { parseDuration } from './policy/duration';
export { RateLimitGuard } from './rate-limit.guard';
export {
  RateLimit,
  SkipRateLimit,
  RateLimitPolicies,
  RateLimitSkip,
  type RateLimitMetadata,
  type RateLimitMetadataDecorator,
} from './rate-limit.decorator';
export {
  RateLimitExceededException,
  RateLimitStoreUnavailableException,
  GraphqlRateLimitExceededException,
  RateLimitExceededProblemException,
  RateLimitStoreUnavailableProblemException,
  RATE_LIMIT_QUOTA_EXCEEDED_TYPE,
  PROBLEM_JSON_CONTENT_TYPE,
  type RateLimitExceededBody,
  type RateLimitGraphqlErrorExtensions,
  type RateLimitProblemDetails,
  type RateLimitStoreUnavailableProblemDetails,
} from './rate-limit.exception';
export type { RateLimitWsErrorPayload } from './contexts/ws.context';
export type { RateLimitRpcErrorPayload } from './contexts/rpc.context';
export { clientIpKey } from './http/client-ip';
