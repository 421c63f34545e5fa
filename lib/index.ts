export { RateLimitModule } from './rate-limit.module';
export {
  RATE_LIMIT_OPTIONS,
  RATE_LIMIT_STORE,
  type RateLimitModuleExtras,
  type RateLimitOptionsFactory,
} from './rate-limit.module-definition';
export {
  RateLimiterService,
  type ConsumeOptions,
  type MultiDecision,
  type AcquireOptions,
  type RateLimitLease,
} from './rate-limiter.service';
export { RateLimitEngine } from './rate-limit.engine';
export { RateLimitEvents, RATE_LIMIT_EVENTS } from './events/rate-limit-events';
export type {
  RateLimitModuleOptions,
  RateLimitHeadersMode,
  RateLimitStoreErrorMode,
  RateLimitHooks,
  RateLimitDecisionEvent,
  RateLimitContextType,
  RateLimitErrorMessage,
} from './interfaces/module-options.interface';
export type {
  RateLimitPolicy,
  RateLimitAlgorithmName,
  Duration,
  ContextValue,
  RateLimitTracker,
  RateLimitSkipIf,
} from './interfaces/policy.interface';
export { RATE_LIMIT_ALGORITHMS } from './interfaces/policy.interface';
export { RATE_LIMIT_CONTEXT_TYPES } from './interfaces/module-options.interface';
export type { RateLimitDecision, RateLimitDecisionReason } from './interfaces/decision.interface';
export { RateLimitConfigError } from './errors/rate-limit-config.error';
export { RateLimitStoreError } from './errors/rate-limit-store.error';
export { RateLimitWaitError, RateLimitShutdownError } from './errors/rate-limit-wait.error';
export { MemoryStore, type MemoryStoreOptions, type RateLimitClock } from './stores/memory.store';
export { RedisStore, type RedisClient } from './stores/redis.store';
export type { RateLimitStore, RateLimitCall, StoreDecision, StoreVerdict, DecisionMode, StoreFallback } from './stores/store.interface';
export { ResilientStore, type ResilientStoreOptions } from './stores/resilient.store';
export { SheddingStore } from './stores/shedding.store';
export { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
export * from './algorithms';
export { parseDuration } from './utils/duration';
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
  type RateLimitExceededBody,
  type RateLimitGraphqlErrorExtensions,
} from './rate-limit.exception';
export type { RateLimitWsErrorPayload } from './contexts/ws.context';
export type { RateLimitRpcErrorPayload } from './contexts/rpc.context';
export { clientIpKey } from './http/client-ip';
