import type { MeterProvider } from '@opentelemetry/api';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { describeValue } from '../shared/describe-value';

/** Options of `RateLimitOpenTelemetryModule.forRoot`. */
export interface RateLimitOpenTelemetryOptions {
  /**
   * Where the instruments are created. Register your SDK's provider before the app boots: the global API
   * has no proxy for meters, so instruments created before then stay no-ops.
   * @default the global provider (`metrics.getMeterProvider()`, set by `NodeSDK.start()`)
   */
  meterProvider?: MeterProvider;
  /**
   * Name of the meter (the instrumentation scope of every metric).
   * @default 'nestjs-redis-ratelimit'
   */
  meterName?: string;
  /**
   * Annotate the active span of each decision (the request's, as your HTTP instrumentation started it):
   * attributes of the policy that decided, and events for rejections and near-limit policies. Costs
   * nothing while no span is recording.
   * @default true
   */
  spans?: boolean;
  /**
   * Bucket boundaries of `ratelimit.decision.duration`, in seconds, given to the SDK as instrument advice
   * (a View you configure wins).
   * @default [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25]
   */
  durationBuckets?: number[];
}

/** Injection token of the {@link RateLimitOpenTelemetryOptions}. */
export const RATE_LIMIT_OPENTELEMETRY_OPTIONS = Symbol('RATE_LIMIT_OPENTELEMETRY_OPTIONS');

const KNOWN_OPTIONS = ['meterProvider', 'meterName', 'spans', 'durationBuckets'];

/** Checks the options at bootstrap; the error names the option, the value and what is allowed. */
export function validateOpenTelemetryOptions(options: RateLimitOpenTelemetryOptions): void {
  const fail = (message: string) => new RateLimitConfigError(`RateLimitOpenTelemetryModule options: ${message}`);
  for (const key of Object.keys(options)) {
    if (!KNOWN_OPTIONS.includes(key)) throw fail(`unknown option '${key}'; known options are ${KNOWN_OPTIONS.join(', ')}.`);
  }
  const { meterProvider, meterName, spans, durationBuckets } = options;
  if (meterProvider !== undefined && typeof (meterProvider as Partial<MeterProvider> | null)?.getMeter !== 'function') {
    throw fail(`meterProvider: ${describeValue(meterProvider)} must be a MeterProvider (an object with getMeter), such as the SDK's.`);
  }
  if (meterName !== undefined && !(typeof meterName === 'string' && meterName.length > 0)) {
    throw fail(`meterName: ${describeValue(meterName)} must be a non-empty string.`);
  }
  if (spans !== undefined && typeof spans !== 'boolean') throw fail(`spans: ${describeValue(spans)} must be true or false.`);
  if (durationBuckets !== undefined && !isIncreasing(durationBuckets)) {
    throw fail(`durationBuckets: ${describeValue(durationBuckets)} must be a non-empty array of finite seconds in increasing order.`);
  }
}

function isIncreasing(buckets: unknown): boolean {
  if (!Array.isArray(buckets) || buckets.length === 0) return false;
  return buckets.every((b, i) => typeof b === 'number' && Number.isFinite(b) && (i === 0 || b > (buckets[i - 1] as number)));
}
