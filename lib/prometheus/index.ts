/**
 * `nestjs-redis-ratelimit/prometheus`: Prometheus metrics (needs the optional peer `prom-client`).
 * @packageDocumentation
 */
export { RateLimitPrometheusModule } from './rate-limit-prometheus.module';
export { RateLimitMetrics, RATE_LIMIT_PROMETHEUS_OPTIONS, type RateLimitPrometheusOptions } from './rate-limit-metrics';
