/**
 * `nestjs-redis-ratelimit/terminus`: a health indicator for the store (needs the optional peer `@nestjs/terminus`).
 * @packageDocumentation
 */
export { RateLimitHealthIndicator, type RateLimitHealthResult } from './rate-limit.health';
