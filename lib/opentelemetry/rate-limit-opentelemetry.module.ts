import { Module, type DynamicModule } from '@nestjs/common';
import { RateLimitOpenTelemetry } from './rate-limit-opentelemetry';
import { RATE_LIMIT_OPENTELEMETRY_OPTIONS, type RateLimitOpenTelemetryOptions } from './rate-limit-opentelemetry.options';

/**
 * OpenTelemetry metrics and span data of the rate limiter, through `@opentelemetry/api` (an optional peer
 * dependency; bring your own SDK): decisions by policy and outcome, decision latency, near-limit decisions,
 * store errors, and attributes and events on the request's active span; see {@link RateLimitOpenTelemetry}.
 * Needs `RateLimitModule` (global by default); adds no store round trip. Start the SDK before the app.
 * @example
 * imports: [RateLimitModule.forRoot({ redis, nearLimitRatio: 0.2 }), RateLimitOpenTelemetryModule.forRoot()]
 */
@Module({})
export class RateLimitOpenTelemetryModule {
  static forRoot(options: RateLimitOpenTelemetryOptions = {}): DynamicModule {
    return {
      module: RateLimitOpenTelemetryModule,
      providers: [{ provide: RATE_LIMIT_OPENTELEMETRY_OPTIONS, useValue: options }, RateLimitOpenTelemetry],
      exports: [RateLimitOpenTelemetry],
    };
  }
}
