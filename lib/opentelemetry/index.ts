/**
 * `nestjs-redis-ratelimit/opentelemetry`: OpenTelemetry metrics and span data (needs the optional peer
 * `@opentelemetry/api`; the SDK is yours).
 * @packageDocumentation
 */
export { RateLimitOpenTelemetryModule } from './rate-limit-opentelemetry.module';
export { RateLimitOpenTelemetry } from './rate-limit-opentelemetry';
export { RATE_LIMIT_OPENTELEMETRY_OPTIONS, type RateLimitOpenTelemetryOptions } from './rate-limit-opentelemetry.options';
export {
  METRIC_RATELIMIT_DECISIONS,
  METRIC_RATELIMIT_DECISION_DURATION,
  METRIC_RATELIMIT_NEAR_LIMIT,
  METRIC_RATELIMIT_STORE_ERRORS,
  ATTR_RATELIMIT_POLICY,
  ATTR_RATELIMIT_OUTCOME,
  ATTR_RATELIMIT_LIMIT,
  ATTR_RATELIMIT_REMAINING,
  ATTR_RATELIMIT_RETRY_AFTER_MS,
  ATTR_RATELIMIT_REASON,
  ATTR_ERROR_TYPE,
  EVENT_RATELIMIT_REJECTED,
  EVENT_RATELIMIT_NEAR_LIMIT,
} from './semantic-conventions';
export type { RateLimitOutcome } from '../events/decision-telemetry';
