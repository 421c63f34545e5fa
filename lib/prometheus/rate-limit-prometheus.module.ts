import { Module, type DynamicModule } from '@nestjs/common';
import { RATE_LIMIT_PROMETHEUS_OPTIONS, RateLimitMetrics, type RateLimitPrometheusOptions } from './rate-limit-metrics';

/**
 * Prometheus metrics of the rate limiter (prom-client, an optional peer dependency): counters of allowed,
 * rejected and near-limit decisions per policy, store errors, and a histogram of decision latency; see
 * {@link RateLimitMetrics}. Needs `RateLimitModule` (global by default); adds no store round trip.
 * @example
 * imports: [RateLimitModule.forRoot({ redis }), RateLimitPrometheusModule.forRoot()]
 * // and serve the registry: @Get('metrics') metrics(@Res() res) { ... this.rateLimitMetrics.metrics() ... }
 */
@Module({})
export class RateLimitPrometheusModule {
  static forRoot(options: RateLimitPrometheusOptions = {}): DynamicModule {
    return {
      module: RateLimitPrometheusModule,
      global: options.global ?? true,
      providers: [{ provide: RATE_LIMIT_PROMETHEUS_OPTIONS, useValue: options }, RateLimitMetrics],
      exports: [RateLimitMetrics],
    };
  }
}
