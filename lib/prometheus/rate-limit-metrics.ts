import { Inject, Injectable, Optional, type OnModuleDestroy } from '@nestjs/common';
import { Counter, Gauge, Histogram, register, type Registry } from 'prom-client';
import { DECISION_DURATION_BUCKETS } from '../events/decision-telemetry';
import { RateLimitEvents } from '../events/rate-limit-events';
import type { RateLimitDecisionEvent } from '../interfaces/module-options.interface';
import { RateLimitAdaptiveLimits, type AdaptiveLimitInUse } from '../overload/adaptive-limits';
import { RateLimitLoadShedding } from '../overload/rate-limit-load-shedding';
import { RATE_LIMIT_STORE } from '../rate-limit.module-definition';
import type { StoreTimings } from '../pipeline/store-deadlines';
import type { RateLimitStore } from '../stores/store.interface';

/** Options of `RateLimitPrometheusModule.forRoot`. */
export interface RateLimitPrometheusOptions {
  /**
   * The registry the metrics are registered in (the one your `/metrics` route serves).
   * @default prom-client's global `register`
   */
  registry?: Registry;
  /**
   * Prefix of every metric name.
   * @default 'rate_limit_'
   */
  prefix?: string;
  /**
   * Buckets of the decision-latency histogram, in seconds.
   * @default [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25]
   */
  buckets?: number[];
  /**
   * Make {@link RateLimitMetrics} injectable everywhere (for a `/metrics` controller in any module).
   * @default true
   */
  global?: boolean;
}

/** Injection token of the {@link RateLimitPrometheusOptions}. */
export const RATE_LIMIT_PROMETHEUS_OPTIONS = Symbol('RATE_LIMIT_PROMETHEUS_OPTIONS');

/**
 * The rate limiter's Prometheus metrics, fed by {@link RateLimitEvents} (so they never add a store round
 * trip):
 * - `rate_limit_allowed_total{policy, reason}` and `rate_limit_rejected_total{policy, reason}`: one per
 *   policy per decision, as that policy decided (`reason`: `counter` = the policy's own counter, `blocked`,
 *   `cost-exceeds-capacity`, `store-unavailable` = `onStoreError` decided, `shadow` = a shadow policy that
 *   would have rejected; the request went through);
 * - `rate_limit_near_limit_total{policy}`: allowed decisions of a policy at or under the module's
 *   `nearLimitRatio` of its limit (Envoy's `near_limit`: clients about to be rejected);
 * - `rate_limit_store_errors_total`: store failures and missed deadlines;
 * - `rate_limit_overrides_total{action}`: runtime override changes this instance applied (`applied`,
 *   `removed`, `expired`; never the tracker, whose values are unbounded);
 * - `rate_limit_decision_duration_seconds{outcome}`: latency of each decision (one per request or
 *   programmatic call; `outcome` `allowed` or `rejected`), store round trip included;
 * - `rate_limit_adaptive_limit{policy, route}` and `rate_limit_adaptive_inflight{policy, route}`: each adaptive
 *   limit's current value and the calls it has in flight, read at each scrape (`route`: `<Controller>.<handler>`,
 *   or `RateLimiterService.admit`). An adaptive policy's admissions are counted in `rate_limit_allowed_total`
 *   and `rate_limit_rejected_total` like any policy's decisions (`reason="counter"`).
 *
 * Metrics already in the registry under the same name are reused (two apps in one process add up); the
 * ones this instance registered are removed when the module is destroyed.
 */
@Injectable()
export class RateLimitMetrics implements OnModuleDestroy {
  /** The registry the metrics live in. */
  readonly registry: Registry;
  /** `rate_limit_allowed_total{policy, reason}`. */
  readonly allowed: Counter<'policy' | 'reason'>;
  /** `rate_limit_rejected_total{policy, reason}`. */
  readonly rejected: Counter<'policy' | 'reason'>;
  /** `rate_limit_near_limit_total{policy}`. */
  readonly nearLimit: Counter<'policy'>;
  /** `rate_limit_store_errors_total`. */
  readonly storeErrors: Counter<string>;
  /** `rate_limit_overrides_total{action}`. */
  readonly overrides: Counter<'action'>;
  /** `rate_limit_decision_duration_seconds{outcome}`. */
  readonly decisionDuration: Histogram<'outcome'>;
  /**
   * `rate_limit_store_latency_seconds{quantile}` (0.5, 0.99, 1) over the last 1,024 store calls: the time Redis
   * took, which `storeTimeoutMs` judges; 0 on the memory store.
   */
  readonly storeLatency: Gauge<'quantile'>;
  /**
   * `rate_limit_event_loop_delay_seconds{quantile}` over the last 1,024 ticks with store calls in flight: this
   * process's own stalls, which no deadline counts; 0 on the memory store.
   */
  readonly eventLoopDelay: Gauge<'quantile'>;
  /**
   * `rate_limit_shedding_level`: what the load shedder refuses, 0 (nothing), 1 (`sheddable`) or 2 (`sheddable`
   * and `default`); only with the module option `loadShedding`.
   */
  readonly sheddingLevel: Gauge<string> | undefined;
  /** `rate_limit_adaptive_limit{policy, route}`: each adaptive limit's current value. */
  readonly adaptiveLimit: Gauge<'policy' | 'route'>;
  /** `rate_limit_adaptive_inflight{policy, route}`: the calls each adaptive limit has in flight. */
  readonly adaptiveInflight: Gauge<'policy' | 'route'>;
  private readonly registered: string[] = [];
  private readonly unsubscribe: () => void;

  constructor(
    events: RateLimitEvents,
    @Inject(RATE_LIMIT_PROMETHEUS_OPTIONS) options: RateLimitPrometheusOptions,
    @Inject(RATE_LIMIT_STORE) store: RateLimitStore,
    @Optional() shedding?: RateLimitLoadShedding,
    @Optional() adaptive?: RateLimitAdaptiveLimits,
  ) {
    this.registry = options.registry ?? register;
    const prefix = options.prefix ?? 'rate_limit_';
    this.allowed = this.counter(`${prefix}allowed_total`, 'Decisions of a policy that allowed, by policy and reason.', [
      'policy',
      'reason',
    ]);
    this.rejected = this.counter(`${prefix}rejected_total`, 'Decisions of a policy that rejected, by policy and reason.', [
      'policy',
      'reason',
    ]);
    this.nearLimit = this.counter(
      `${prefix}near_limit_total`,
      'Allowed decisions of a policy with at most nearLimitRatio of its limit left, by policy.',
      ['policy'],
    );
    this.storeErrors = this.counter(`${prefix}store_errors_total`, 'Rate-limit store failures and missed deadlines.', []);
    this.overrides = this.counter(`${prefix}overrides_total`, 'Runtime override changes applied by this instance, by action.', ['action']);
    this.decisionDuration = this.metric(
      `${prefix}decision_duration_seconds`,
      Histogram,
      () =>
        new Histogram({
          name: `${prefix}decision_duration_seconds`,
          help: 'Latency of rate-limit decisions (store round trip included), by outcome.',
          labelNames: ['outcome'],
          buckets: options.buckets ?? [...DECISION_DURATION_BUCKETS],
          registers: [this.registry],
        }),
    );
    const timings = () => store.timings?.();
    this.storeLatency = this.quantiles(
      `${prefix}store_latency_seconds`,
      'Time the rate-limit store took to answer lately.',
      () => timings()?.storeLatencyMs,
    );
    this.eventLoopDelay = this.quantiles(
      `${prefix}event_loop_delay_seconds`,
      "This process's event-loop delay while rate-limit store calls were in flight (not counted by storeTimeoutMs).",
      () => timings()?.eventLoopDelayMs,
    );
    this.sheddingLevel =
      shedding?.shedder &&
      (this.metric(
        `${prefix}shedding_level`,
        Gauge,
        () =>
          new Gauge({
            name: `${prefix}shedding_level`,
            help: "Classes of calls the load shedder refuses: 0 none, 1 'sheddable', 2 'sheddable' and 'default'.",
            registers: [this.registry],
          }),
      ) as Gauge<string>);
    const limits = () => adaptive?.all ?? [];
    this.adaptiveLimit = this.perAdaptiveLimit(
      `${prefix}adaptive_limit`,
      'The current value of each adaptive limit (requests in flight it admits), by policy and route.',
      limits,
      ({ limiter }) => limiter.strategyLimit,
    );
    this.adaptiveInflight = this.perAdaptiveLimit(
      `${prefix}adaptive_inflight`,
      'Requests in flight under each adaptive limit, by policy and route.',
      limits,
      ({ limiter }) => limiter.inflight,
    );
    this.unsubscribe = events.subscribe({
      decision: (event) => this.record(event),
      nearLimit: ({ policy }) => this.nearLimit.inc({ policy }),
      storeError: () => this.storeErrors.inc(),
      override: ({ action }) => this.overrides.inc({ action }),
      shedding: ({ level }) => this.sheddingLevel?.set(level === 'none' ? 0 : level === 'sheddable' ? 1 : 2),
    });
  }

  /** The registry's exposition text, for a `/metrics` route (serve it with {@link contentType}). */
  metrics(): Promise<string> {
    return this.registry.metrics();
  }

  /** `Content-Type` of {@link metrics}. */
  get contentType(): string {
    return this.registry.contentType;
  }

  onModuleDestroy(): void {
    this.unsubscribe();
    for (const name of this.registered) this.registry.removeSingleMetric(name);
  }

  private record({ allowed, decisions, durationMs }: RateLimitDecisionEvent): void {
    for (const d of decisions) (d.allowed ? this.allowed : this.rejected).inc({ policy: d.policy, reason: d.reason ?? 'counter' });
    this.decisionDuration.observe({ outcome: allowed ? 'allowed' : 'rejected' }, durationMs / 1_000);
  }

  private counter<L extends string>(name: string, help: string, labelNames: L[]): Counter<L> {
    return this.metric(name, Counter, () => new Counter({ name, help, labelNames, registers: [this.registry] })) as Counter<L>;
  }

  /** A gauge of three quantiles read from the store at each scrape. */
  private quantiles(name: string, help: string, read: () => StoreTimings['storeLatencyMs'] | undefined): Gauge<'quantile'> {
    return this.metric(
      name,
      Gauge,
      () =>
        new Gauge({
          name,
          help,
          labelNames: ['quantile'],
          registers: [this.registry],
          collect() {
            const { p50, p99, max } = read() ?? { p50: 0, p99: 0, max: 0 };
            this.set({ quantile: '0.5' }, p50 / 1_000);
            this.set({ quantile: '0.99' }, p99 / 1_000);
            this.set({ quantile: '1' }, max / 1_000);
          },
        }),
    ) as Gauge<'quantile'>;
  }

  /** A gauge of one value per adaptive limit, read at each scrape. */
  private perAdaptiveLimit(
    name: string,
    help: string,
    limits: () => readonly AdaptiveLimitInUse[],
    read: (limit: AdaptiveLimitInUse) => number,
  ): Gauge<'policy' | 'route'> {
    return this.metric(
      name,
      Gauge,
      () =>
        new Gauge({
          name,
          help,
          labelNames: ['policy', 'route'],
          registers: [this.registry],
          collect() {
            for (const limit of limits()) this.set({ policy: limit.policy, route: limit.route }, read(limit));
          },
        }),
    ) as Gauge<'policy' | 'route'>;
  }

  /** The metric `name` of the registry if it is a `type`, else a new one this instance owns. */
  private metric<M extends object>(name: string, type: abstract new (...args: never[]) => M, create: () => M): M {
    const existing = this.registry.getSingleMetric(name);
    if (existing instanceof type) return existing;
    if (existing) {
      throw new Error(
        `RateLimitPrometheusModule: the registry already has a metric '${name}' of another type; ` +
          `give RateLimitPrometheusModule.forRoot({ prefix }) another prefix or pass it its own registry.`,
      );
    }
    this.registered.push(name);
    return create();
  }
}
