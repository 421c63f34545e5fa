import { Controller, Get, Res } from '@nestjs/common';
import { SkipRateLimit } from '../lib';
import { RateLimitMetrics } from '../lib/prometheus';

/** The Prometheus scrape target (prom-client's global registry, where RateLimitPrometheusModule registers). */
@Controller()
export class MetricsController {
  constructor(private readonly rateLimitMetrics: RateLimitMetrics) {}

  /**
   * `rate_limit_allowed_total` / `rate_limit_rejected_total` / `rate_limit_near_limit_total` per policy, `rate_limit_store_errors_total`,
   * `rate_limit_decision_duration_seconds`. Never limited: a scraper must always get through.
   */
  @Get('metrics')
  @SkipRateLimit()
  async metrics(@Res({ passthrough: true }) res: { header(name: string, value: string): unknown }): Promise<string> {
    res.header('Content-Type', this.rateLimitMetrics.contentType);
    return this.rateLimitMetrics.metrics();
  }
}
