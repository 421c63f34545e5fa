/**
 * `nestjs-redis-ratelimit/event-emitter`: the rate limiter's events on `@nestjs/event-emitter` (an optional peer).
 * @packageDocumentation
 */
export { RateLimitEventEmitterModule, RateLimitEventEmitterBridge } from './rate-limit-event-emitter.module';
export { RATE_LIMIT_EVENTS } from '../events/rate-limit-events';
