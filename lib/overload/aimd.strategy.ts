import type { AdaptiveSample, AdaptiveStrategy } from './adaptive-strategy';

/** What an {@link AimdStrategy} starts from; the defaults are `AIMDLimit.newBuilder().build()`'s. */
export interface AimdOptions {
  /** @default 20 */
  initial?: number;
  /** @default 20 */
  min?: number;
  /** @default 200 */
  max?: number;
}

const BACKOFF_RATIO = 0.9;
/** A request slower than this counts as dropped (Java's default timeout, 5 s). */
const TIMEOUT_MS = 5_000;

/**
 * concurrency-limits' `AIMDLimit` with its defaults: `+1` per window while at least half the limit is in
 * flight, `×0.9` on a drop or a window slower than 5 s. It reads no latency below the timeout, so it needs no
 * no-load reference and has none of the others' pitfalls; it reacts only to failures.
 */
export class AimdStrategy implements AdaptiveStrategy {
  readonly probeDue = false;
  private current: number;
  private readonly min: number;
  private readonly max: number;

  constructor({ initial = 20, min = 20, max = 200 }: AimdOptions = {}) {
    this.current = initial;
    this.min = min;
    this.max = max;
  }

  get limit(): number {
    return this.current;
  }

  update({ rttMs, inflight, dropped }: AdaptiveSample): number {
    let limit = this.current;
    if (dropped || rttMs > TIMEOUT_MS) limit = Math.trunc(limit * BACKOFF_RATIO);
    else if (inflight * 2 >= limit) limit = limit + 1;
    this.current = Math.min(this.max, Math.max(this.min, limit));
    return this.current;
  }
}
