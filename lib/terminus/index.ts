/**
 * `nestjs-redis-ratelimit/terminus`: a health indicator for the store (needs the optional peer `@nestjs/terminus`).
 * @packageDocumentation
 */
export { RateLimitHealthIndicator } from './rate-limit.health';
