/**
 * One measurement an adaptive strategy updates its limit from: a window of completed requests (see
 * AdaptiveLimiter), as concurrency-limits' `Limit.onSample(startTime, rtt, inflight, didDrop)` receives it.
 */
export interface AdaptiveSample {
  /** Round-trip time in ms: the window's average. */
  rttMs: number;
  /** Requests in flight when the busiest request of the window started. */
  inflight: number;
  /** Whether a request of the window timed out or was dropped downstream. */
  dropped: boolean;
}

/**
 * A limit on requests in flight that follows measured latency: a port of one of Netflix concurrency-limits'
 * `Limit` classes. Pure arithmetic: no clock, no timers.
 */
export interface AdaptiveStrategy {
  /** The current limit, a whole number ≥ 1 (Java's `getLimit()`). */
  readonly limit: number;
  /**
   * Whether the next window should measure the no-load RTT: the limiter then admits at most a few requests
   * for one window and passes that window to {@link update} with `probe` set.
   */
  readonly probeDue: boolean;
  /** Takes in one window; returns the new limit. */
  update(sample: AdaptiveSample, probe?: boolean): number;
}

/**
 * concurrency-limits' `Log10RootIntFunction` (baseline 0): `max(1, ⌊log10 n⌋)` below 1000 (a lookup
 * table there), `⌊log10 n⌋` from 1000 on. Java's `(int) Math.log10(0)` is `Integer.MIN_VALUE`, so 0 gives 1.
 */
export function log10Root(n: number): number {
  if (n < 1000) return n <= 0 ? 1 : Math.max(1, Math.trunc(Math.log10(n)));
  return Math.trunc(Math.log10(n));
}

/** Java's `(int)` of a double: truncation toward zero. */
export function javaInt(x: number): number {
  return Math.trunc(x);
}
