import { javaInt, log10Root, type AdaptiveSample, type AdaptiveStrategy } from './adaptive-strategy';

/** What a {@link VegasStrategy} starts from; the defaults are `VegasLimit.newDefault()`'s. */
export interface VegasOptions {
  /** @default 20 */
  initial?: number;
  /** Java's `maxConcurrency`. @default 1000 */
  max?: number;
  /** Floor of the limit (Java has none below 1). @default 1 */
  min?: number;
  /**
   * `'sample'`: Java's probe, which takes the RTT of whichever sample comes due as `rtt_noload` (under steady
   * overload that RTT includes queueing, and each probe ratchets the limit up by `beta`). `'window'`: the
   * probe asks the limiter for a window at a few requests in flight and takes its RTT, which is the no-load
   * one. @default 'window'
   */
  probe?: 'sample' | 'window';
  /** Java's `ThreadLocalRandom.nextDouble(0.5, 1)` as a uniform draw in [0, 1); injectable for tests. */
  random?: () => number;
}

/** Java's `probeMultiplier` default. */
const PROBE_MULTIPLIER = 30;

/**
 * concurrency-limits' `VegasLimit` with its defaults (smoothing 1, alpha 3·log10, beta 6·log10, threshold
 * log10, increase and decrease by log10): the limit grows while the estimated queue
 * `⌈L·(1 − rtt_noload/rtt)⌉` is short and shrinks once it exceeds beta. `rtt_noload` is re-measured by a probe
 * every `jitter·30·L` updates, the jitter drawn per probe in [0.5, 1) so instances do not probe in step.
 * With `probe: 'sample'` it is the Java arithmetic step for step (the golden vectors check it).
 */
export class VegasStrategy implements AdaptiveStrategy {
  private estimatedLimit: number;
  private rttNoLoad = 0;
  private probeCount = 0;
  private probeJitter = 0;
  private waitingForProbe = false;
  private readonly max: number;
  private readonly min: number;
  private readonly probeMode: 'sample' | 'window';
  private readonly random: () => number;

  constructor({ initial = 20, max = 1000, min = 1, probe = 'window', random = Math.random }: VegasOptions = {}) {
    this.estimatedLimit = initial;
    this.max = max;
    this.min = min;
    this.probeMode = probe;
    this.random = random;
    this.resetProbeJitter();
  }

  get limit(): number {
    return javaInt(this.estimatedLimit);
  }

  get probeDue(): boolean {
    return this.waitingForProbe;
  }

  /** The no-load RTT the queue is estimated against (ms); 0 before the first sample. */
  get noLoadRttMs(): number {
    return this.rttNoLoad;
  }

  update({ rttMs, inflight, dropped }: AdaptiveSample, probe = false): number {
    if (probe && this.waitingForProbe) {
      this.waitingForProbe = false;
      this.rttNoLoad = rttMs;
      return this.limit;
    }
    this.probeCount++;
    if (this.shouldProbe()) {
      this.resetProbeJitter();
      this.probeCount = 0;
      if (this.probeMode === 'sample') this.rttNoLoad = rttMs;
      else this.waitingForProbe = true;
      return this.limit;
    }
    if (this.rttNoLoad === 0 || rttMs < this.rttNoLoad) {
      this.rttNoLoad = rttMs;
      return this.limit;
    }
    return this.updateEstimatedLimit(rttMs, inflight, dropped);
  }

  private shouldProbe(): boolean {
    return this.probeJitter * PROBE_MULTIPLIER * this.estimatedLimit <= this.probeCount;
  }

  private resetProbeJitter(): void {
    this.probeJitter = 0.5 + 0.5 * this.random();
  }

  private updateEstimatedLimit(rtt: number, inflight: number, dropped: boolean): number {
    const estimated = this.estimatedLimit;
    const whole = javaInt(estimated);
    const queueSize = Math.ceil(estimated * (1 - this.rttNoLoad / rtt));
    let newLimit: number;
    if (dropped) {
      newLimit = estimated - log10Root(whole);
    } else if (inflight * 2 < estimated) {
      // Not close to the limit: no evidence either way (Java: prevents upward drift while app-limited).
      return whole;
    } else {
      const alpha = 3 * log10Root(whole);
      const beta = 6 * log10Root(whole);
      const threshold = log10Root(whole);
      if (queueSize <= threshold) newLimit = estimated + beta;
      else if (queueSize < alpha) newLimit = estimated + log10Root(whole);
      else if (queueSize > beta) newLimit = estimated - log10Root(whole);
      else return whole;
    }
    // smoothing is 1: (1 - 1)·L + 1·newLimit is newLimit itself.
    this.estimatedLimit = Math.max(this.min, Math.max(1, Math.min(this.max, newLimit)));
    return this.limit;
  }
}
