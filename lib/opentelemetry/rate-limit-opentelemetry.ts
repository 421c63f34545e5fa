import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { metrics, trace, type Counter, type Histogram, type Span, type UpDownCounter } from '@opentelemetry/api';
import { DECISION_DURATION_BUCKETS, policyOutcome, requestVerdict } from '../events/decision-telemetry';
import { RateLimitEvents } from '../events/rate-limit-events';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitDecisionEvent } from '../interfaces/module-options.interface';
import {
  RATE_LIMIT_OPENTELEMETRY_OPTIONS,
  validateOpenTelemetryOptions,
  type RateLimitOpenTelemetryOptions,
} from './rate-limit-opentelemetry.options';
import {
  ATTR_ERROR_TYPE,
  ATTR_RATELIMIT_OUTCOME,
  ATTR_RATELIMIT_POLICY,
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
  private readonly spans: boolean;
  private readonly unsubscribe: () => void;

  constructor(events: RateLimitEvents, @Inject(RATE_LIMIT_OPENTELEMETRY_OPTIONS) options: RateLimitOpenTelemetryOptions) {
    validateOpenTelemetryOptions(options);
    const meter = (options.meterProvider ?? metrics).getMeter(options.meterName ?? DEFAULT_METER_NAME);
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
