import { Inject, Injectable, Optional, type OnModuleDestroy } from '@nestjs/common';
import {
  metrics,
  trace,
  type BatchObservableCallback,
  type Counter,
  type Histogram,
  type Meter,
  type ObservableGauge,
  type Span,
  type UpDownCounter,
} from '@opentelemetry/api';
import { DECISION_DURATION_BUCKETS, policyOutcome, requestVerdict } from '../events/decision-telemetry';
import { RateLimitEvents } from '../events/rate-limit-events';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitDecisionEvent } from '../interfaces/module-options.interface';
import {
  RATE_LIMIT_OPENTELEMETRY_OPTIONS,
  validateOpenTelemetryOptions,
  type RateLimitOpenTelemetryOptions,
} from './rate-limit-opentelemetry.options';
import { RateLimitAdaptiveLimits } from '../overload/adaptive-limits';
import {
  ATTR_ERROR_TYPE,
  ATTR_RATELIMIT_OUTCOME,
  ATTR_RATELIMIT_POLICY,
  ATTR_RATELIMIT_ROUTE,
  METRIC_RATELIMIT_ADAPTIVE_INFLIGHT,
  METRIC_RATELIMIT_ADAPTIVE_LIMIT,
  METRIC_RATELIMIT_DECISION_DURATION,
  METRIC_RATELIMIT_DECISIONS,
  METRIC_RATELIMIT_NEAR_LIMIT,
  METRIC_RATELIMIT_SHEDDING_LEVEL,
  METRIC_RATELIMIT_STORE_ERRORS,
} from './semantic-conventions';
import type { RateLimitSheddingLevel } from '../interfaces/overload.interface';
import { annotateDecision, annotateNearLimit } from './span-annotations';

/** Default instrumentation scope: the package. */
const DEFAULT_METER_NAME = 'nestjs-redis-ratelimit';
/** A shedding level as the number the metrics report. */
const SHEDDING_LEVELS: Readonly<Record<RateLimitSheddingLevel, number>> = { none: 0, sheddable: 1, default: 2 };

/**
 * The rate limiter's OpenTelemetry signals, fed by {@link RateLimitEvents} (so they never add a store round
 * trip):
 * - `ratelimit.decisions{ratelimit.policy, ratelimit.outcome}` (counter): one per policy per decision;
 * - `ratelimit.decision.duration{ratelimit.outcome}` (histogram, s): one per decision, outcome of the policy
 *   that decided;
 * - `ratelimit.near_limit{ratelimit.policy}` (counter): allowed decisions at or under the module's
 *   `nearLimitRatio` of their limit;
 * - `ratelimit.store.errors{error.type}` (counter): store failures and missed deadlines;
 * - `ratelimit.adaptive.limit{ratelimit.policy, ratelimit.route}` and `ratelimit.adaptive.inflight{…}`
 *   (gauges): each adaptive limit's current value and the requests it has in flight, observed at each
 *   collection; an adaptive policy's admissions count in `ratelimit.decisions` like any policy's decisions;
 * - on the active span, when one is recording: `ratelimit.policy`, `ratelimit.outcome`, `ratelimit.limit`,
 *   `ratelimit.remaining`, `ratelimit.retry_after_ms` of the policy that decided, plus `ratelimit.rejected`
 *   and `ratelimit.near_limit` events.
 */
@Injectable()
export class RateLimitOpenTelemetry implements OnModuleDestroy {
  /** `ratelimit.decisions`. */
  readonly decisions: Counter;
  /** `ratelimit.decision.duration`. */
  readonly decisionDuration: Histogram;
  /** `ratelimit.near_limit`. */
  readonly nearLimit: Counter;
  /** `ratelimit.store.errors`. */
  readonly storeErrors: Counter;
  /** `ratelimit.shedding.level`: what the load shedder refuses, 0 (nothing) to 2 (`sheddable` and `default`). */
  readonly sheddingLevel: UpDownCounter;
  /** `ratelimit.adaptive.limit`. */
  readonly adaptiveLimit: ObservableGauge;
  /** `ratelimit.adaptive.inflight`. */
  readonly adaptiveInflight: ObservableGauge;
  private readonly spans: boolean;
  private readonly unsubscribe: () => void;
  private readonly meter: Meter;
  private readonly observeAdaptive: BatchObservableCallback;

  constructor(
    events: RateLimitEvents,
    @Inject(RATE_LIMIT_OPENTELEMETRY_OPTIONS) options: RateLimitOpenTelemetryOptions,
    @Optional() adaptive?: RateLimitAdaptiveLimits,
  ) {
    validateOpenTelemetryOptions(options);
    const meter = (options.meterProvider ?? metrics).getMeter(options.meterName ?? DEFAULT_METER_NAME);
    this.meter = meter;
    this.decisions = meter.createCounter(METRIC_RATELIMIT_DECISIONS, {
      description: 'Rate-limit decisions, one per policy per request, by policy and outcome.',
      unit: '{decision}',
    });
    this.decisionDuration = meter.createHistogram(METRIC_RATELIMIT_DECISION_DURATION, {
      description: 'Latency of rate-limit decisions (store round trip included), by outcome.',
      unit: 's',
      advice: { explicitBucketBoundaries: [...(options.durationBuckets ?? DECISION_DURATION_BUCKETS)] },
    });
    this.nearLimit = meter.createCounter(METRIC_RATELIMIT_NEAR_LIMIT, {
      description: 'Allowed rate-limit decisions with at most nearLimitRatio of the limit left, by policy.',
      unit: '{decision}',
    });
    this.storeErrors = meter.createCounter(METRIC_RATELIMIT_STORE_ERRORS, {
      description: 'Rate-limit store failures and missed deadlines.',
      unit: '{error}',
    });
    this.sheddingLevel = meter.createUpDownCounter(METRIC_RATELIMIT_SHEDDING_LEVEL, {
      description: "Classes of calls the load shedder refuses: 0 none, 1 'sheddable', 2 'sheddable' and 'default'.",
      unit: '{class}',
    });
    this.adaptiveLimit = meter.createObservableGauge(METRIC_RATELIMIT_ADAPTIVE_LIMIT, {
      description: 'The current value of each adaptive limit (requests in flight it admits), by policy and route.',
      unit: '{request}',
    });
    this.adaptiveInflight = meter.createObservableGauge(METRIC_RATELIMIT_ADAPTIVE_INFLIGHT, {
      description: 'Requests in flight under each adaptive limit, by policy and route.',
      unit: '{request}',
    });
    this.observeAdaptive = (result) => {
      for (const { policy, route, limiter } of adaptive?.all ?? []) {
        const attributes = { [ATTR_RATELIMIT_POLICY]: policy, [ATTR_RATELIMIT_ROUTE]: route };
        result.observe(this.adaptiveLimit, limiter.strategyLimit, attributes);
        result.observe(this.adaptiveInflight, limiter.inflight, attributes);
      }
    };
    meter.addBatchObservableCallback(this.observeAdaptive, [this.adaptiveLimit, this.adaptiveInflight]);
    this.spans = options.spans ?? true;
    this.unsubscribe = events.subscribe({
      decision: (event) => this.record(event),
      nearLimit: (decision) => this.recordNearLimit(decision),
      storeError: (error) => this.storeErrors.add(1, { [ATTR_ERROR_TYPE]: error.name || 'Error' }),
      shedding: ({ level, previous }) => this.sheddingLevel.add(SHEDDING_LEVELS[level] - SHEDDING_LEVELS[previous]),
    });
  }

  onModuleDestroy(): void {
    this.unsubscribe();
    this.meter.removeBatchObservableCallback(this.observeAdaptive, [this.adaptiveLimit, this.adaptiveInflight]);
  }

  private record(event: RateLimitDecisionEvent): void {
    const { decisions } = event;
    for (let i = 0; i < decisions.length; i++) {
      this.decisions.add(1, { [ATTR_RATELIMIT_POLICY]: decisions[i].policy, [ATTR_RATELIMIT_OUTCOME]: policyOutcome(event, i) });
    }
    const verdict = requestVerdict(event);
    this.decisionDuration.record(event.durationMs / 1_000, { [ATTR_RATELIMIT_OUTCOME]: verdict.outcome });
    const span = this.recordingSpan();
    if (span) annotateDecision(span, event, verdict);
  }

  private recordNearLimit(decision: RateLimitDecision): void {
    this.nearLimit.add(1, { [ATTR_RATELIMIT_POLICY]: decision.policy });
    const span = this.recordingSpan();
    if (span) annotateNearLimit(span, decision);
  }

  /** The request's span, if spans are on and it records (hooks run synchronously in the request's context). */
  private recordingSpan(): Span | undefined {
    if (!this.spans) return undefined;
    const span = trace.getActiveSpan();
    return span?.isRecording() ? span : undefined;
  }
}
