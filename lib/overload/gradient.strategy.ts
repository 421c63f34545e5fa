import { javaInt, type AdaptiveSample, type AdaptiveStrategy } from './adaptive-strategy';

/** What a {@link GradientStrategy} starts from; the defaults are `Gradient2Limit.newDefault()`'s. */
export interface GradientOptions {
  /** @default 20 */
  initial?: number;
  /** @default 20 */
  min?: number;
  /** Java's `maxConcurrency`. @default 200 */
  max?: number;
  /**
   * `'java'`: Gradient2 as it is, whose long RTT follows every window, so under steady overload it catches up
   * with the queueing it measures and the limit climbs to its max. `'anchored'`: see {@link GradientStrategy}.
   * @default 'anchored'
   */
  baseline?: 'java' | 'anchored';
}

const SMOOTHING = 0.2;
const QUEUE_SIZE = 4;
const TOLERANCE = 1.5;
/** `'anchored'`: the limit grows only while the RTT is within this factor of the reference. */
const GROWTH_TOLERANCE = 1.1;
const LONG_WINDOW = 600;
const WARMUP_WINDOW = 10;

/**
 * concurrency-limits' `ExpAvgMeasurement`: the plain average of the first `warmup` samples, then an
 * exponential average with factor `2 / (window + 1)`.
 */
class ExpAvg {
  value = 0;
  private sum = 0;
  private count = 0;

  constructor(
    private readonly window: number,
    private readonly warmup: number,
  ) {}

  add(sample: number): number {
    if (this.count < this.warmup) {
      this.count++;
      this.sum += sample;
      this.value = this.sum / this.count;
    } else {
      const factor = 2.0 / (this.window + 1);
      this.value = this.value * (1 - factor) + sample * factor;
    }
    return this.value;
  }

  /** Starts over from `sample`, warmed up: the next samples are averaged exponentially into it. */
  restart(sample: number): void {
    this.count = this.warmup;
    this.sum = sample * this.warmup;
    this.value = sample;
  }
}

/**
 * concurrency-limits' `Gradient2Limit` with its defaults (smoothing 0.2, queue size 4, RTT tolerance 1.5, long
 * window 600): `L ← 0.8·L + 0.2·(L·gradient + 4)`, `gradient = clamp(1.5·longRtt / shortRtt, 0.5, 1)`, so one
 * window cuts at most 10 %. With `baseline: 'java'` it is the Java arithmetic step for step.
 *
 * `'anchored'` (the default) keeps the long RTT a no-load reference. A window that was at the limit and slower
 * than the reference is not averaged into it (that slowness is the queue the limit lets in; averaging it is
 * Gradient2's drift to its max under steady overload). The `+4` headroom applies only while the short RTT is
 * within 10 % of the reference: between that and the 1.5 tolerance the limit holds, beyond it the limit is
 * cut, so it settles at the edge of its queue rather than 4 above wherever the RTT reaches 1.5×.
 * A window at the floor that is still beyond the tolerance re-measures the reference: cut as far as it
 * may go, the instance still sees slow responses, so the latency is a dependency's, not its own queue.
 * And the reference starts from the fastest of the first 10 windows, not their average (Java's warm-up): a
 * stall or a cold start in those windows averaged in stays, since Java's reset only brings the long RTT down
 * to twice the short one, and the headroom then grows the limit until its queue doubles the RTT.
 */
export class GradientStrategy implements AdaptiveStrategy {
  readonly probeDue = false;
  private estimatedLimit: number;
  private readonly longRtt = new ExpAvg(LONG_WINDOW, WARMUP_WINDOW);
  private readonly min: number;
  private readonly max: number;
  private readonly anchored: boolean;
  private warmupWindows = 0;

  constructor({ initial = 20, min = 20, max = 200, baseline = 'anchored' }: GradientOptions = {}) {
    this.estimatedLimit = initial;
    this.min = min;
    this.max = max;
    this.anchored = baseline === 'anchored';
  }

  get limit(): number {
    return javaInt(this.estimatedLimit);
  }

  /** The long (reference) RTT in ms. */
  get longRttMs(): number {
    return this.longRtt.value;
  }

  update({ rttMs, inflight }: AdaptiveSample): number {
    const estimated = this.estimatedLimit;
    const shortRtt = rttMs;
    const longRtt = this.anchored ? this.anchoredLongRtt(rttMs, inflight) : this.longRtt.add(rttMs);
    if (longRtt / shortRtt > 2) this.longRtt.value *= 0.95;
    // Don't grow the limit if we are app limited (Java).
    if (inflight < estimated / 2) return javaInt(estimated);
    const gradient = Math.max(0.5, Math.min(1.0, (TOLERANCE * longRtt) / shortRtt));
    const headroom = !this.anchored || shortRtt < GROWTH_TOLERANCE * longRtt ? QUEUE_SIZE : 0;
    let newLimit = estimated * gradient + headroom;
    newLimit = estimated * (1 - SMOOTHING) + newLimit * SMOOTHING;
    newLimit = Math.max(this.min, Math.min(this.max, newLimit));
    this.estimatedLimit = newLimit;
    return javaInt(newLimit);
  }

  /** The reference for this window: see the class comment. */
  private anchoredLongRtt(rttMs: number, inflight: number): number {
    const reference = this.longRtt.value;
    if (this.warmupWindows < WARMUP_WINDOW) {
      this.warmupWindows++;
      if (reference === 0 || rttMs < reference) this.longRtt.restart(rttMs);
      return this.longRtt.value;
    }
    if (javaInt(this.estimatedLimit) <= this.min && rttMs > TOLERANCE * reference) {
      this.longRtt.value = rttMs;
      return rttMs;
    }
    const queued = inflight >= javaInt(this.estimatedLimit) && rttMs > reference;
    return queued ? reference : this.longRtt.add(rttMs);
  }
}
