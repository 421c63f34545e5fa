import type { RateLimitDecision } from './decision.interface';

/**
 * How much a request matters when the app is short of capacity (Google SRE's criticality): `'sheddable'` is
 * refused first, then `'default'`; `'critical'` keeps its share of an adaptive limit and is never refused by
 * load shedding alone. Set with `@RateLimitPriority(...)` or the module's `priority` function.
 */
export type RateLimitCriticality = 'critical' | 'default' | 'sheddable';

/** The criticalities, from the most to the least important. */
export const RATE_LIMIT_CRITICALITIES: readonly RateLimitCriticality[] = ['critical', 'default', 'sheddable'];

/** The strategies an adaptive limit can follow (ports of Netflix concurrency-limits' limits). */
export type RateLimitAdaptiveStrategy = 'vegas' | 'gradient' | 'aimd';

/** Field `adaptive` of an adaptive policy: how its limit follows latency. */
export interface RateLimitAdaptiveOptions {
  /**
   * `'vegas'` estimates the queue from RTT against a no-load RTT, re-measured by jittered probes;
   * `'gradient'` scales the limit by the ratio of a no-load reference RTT to the current one (at most −10 % per
   * window); `'aimd'` adds one per window and cuts by 10 % on a timeout or a dropped request.
   * @default 'vegas'
   */
  strategy?: RateLimitAdaptiveStrategy;
  /** The floor of the limit. @default concurrency-limits' own: 1 for vegas, 20 for gradient and aimd (at most `limit`) */
  min?: number;
  /** The limit before anything is measured. @default 20 (between `min` and `limit`) */
  initial?: number;
  /**
   * Shares of the limit guaranteed to each criticality, as concurrency-limits' partitioned limiter: a share is
   * enforced only while the whole limit is reached, so a class may use idle capacity beyond its share; a
   * criticality without a share is refused whenever the whole limit is reached. Shares add up to at most 1.
   * @example { critical: 0.5, default: 0.4, sheddable: 0.1 }
   */
  partitions?: Partial<Record<RateLimitCriticality, number>>;
}

/**
 * A per-instance limit on the requests in flight that follows the latency this instance measures. Declared
 * like any policy; a request over it gets 503 with `Retry-After`.
 * @example @RateLimit({ algorithm: 'adaptive', limit: 200, adaptive: { strategy: 'gradient', min: 10 } })
 */
export interface RateLimitAdaptivePolicy {
  algorithm: 'adaptive';
  /** The ceiling of the adaptive limit: it never admits more in flight than this. */
  limit: number;
  /** The policy's name in headers. @default 'adaptive' */
  name?: string;
  adaptive?: RateLimitAdaptiveOptions;
}

/** How a request admitted by an adaptive limit ended, as a measurement of the limit. */
export type RateLimitAdaptiveOutcome = 'success' | 'dropped' | 'ignored';

/**
 * One unit of work admitted (or refused) by an adaptive limit through `RateLimiterService.admit`. Release it
 * when the work ends: its duration is the limit's measurement.
 * @example
 * const admission = limiter.admit(exportsLimit, { priority: 'sheddable' });
 * if (!admission.decision.allowed) throw new ServiceUnavailableException();
 * try { await runExport(); admission.release(); } catch (e) { admission.release(isTimeout(e) ? 'dropped' : 'ignored'); throw e; }
 */
export interface RateLimitAdmission {
  /** `allowed`, the limit, `remaining` (the limit less the work in flight) and, when refused, `retryAfterMs`. */
  readonly decision: RateLimitDecision;
  /**
   * Frees the slot. `'success'` (the default) measures the time since admission, or `rttMs` when given (for
   * work whose own timing is better known); `'dropped'` (a timeout, or a dependency refused it) also makes the
   * limit back off; `'ignored'` (the work failed fast or was cancelled) measures nothing. Only the first call
   * counts; on a refused admission it does nothing.
   */
  release(outcome?: RateLimitAdaptiveOutcome, rttMs?: number): void;
}

/**
 * Module option `loadShedding`: refuse calls while this process is under pressure, the least critical first.
 * A signal is over its threshold when its reading of the last interval exceeds it; any signal over means
 * pressure.
 */
export interface RateLimitLoadSheddingOptions {
  /** The longest event-loop delay of an interval (`perf_hooks.monitorEventLoopDelay`), ms. @default 100 */
  eventLoopDelayMs?: number;
  /** Event-loop utilisation over an interval (`performance.eventLoopUtilization`), in (0, 1]. @default 0.98 */
  eventLoopUtilization?: number;
  /** `heapUsed / heap_size_limit`, in (0, 1]. @default not watched */
  heapUsedRatio?: number;
  /** How often the signals are read, and the shedder moves by at most one class. @default 1000 */
  sampleIntervalMs?: number;
}

/**
 * What the shedder refuses: nothing, `'sheddable'` calls, or `'sheddable'` and `'default'` calls. Never
 * `'critical'` ones on pressure alone.
 */
export type RateLimitSheddingLevel = 'none' | 'sheddable' | 'default';

/** The process signals of one interval, as the shedder read them. */
export interface RateLimitPressure {
  eventLoopDelayMs: number;
  eventLoopUtilization: number;
  heapUsedRatio: number;
}

/** A change of what the shedder refuses (the `shedding` hook and event). */
export interface RateLimitSheddingEvent {
  level: RateLimitSheddingLevel;
  previous: RateLimitSheddingLevel;
  /** The readings that moved it. */
  pressure: RateLimitPressure;
}
