import type { AdaptiveSample, AdaptiveStrategy } from '../../lib/overload/adaptive-strategy';
import { AdaptiveLimiter, type AdaptiveLease } from '../../lib/overload/adaptive-limiter';

/**
 * A simulated server that shares its capacity between the requests in flight (processor sharing): up to
 * `capacity` requests each take `baseMs`; beyond that each runs `capacity / n` as fast, so the RTT is
 * `baseMs · max(1, n / capacity)`. Requests arrive at `load ×` what it can serve, at even intervals, through
 * an AdaptiveLimiter; time is simulated event by event, never read from the machine.
 */
export class ProcessorSharingRun {
  now = 0;
  capacity: number;
  baseMs: number;
  readonly limiter: AdaptiveLimiter;
  /** The strategy's limit after each update it took in. */
  readonly limits: number[] = [];
  admitted = 0;
  refused = 0;
  private virtual = 0;
  private readonly jobs: Array<{ endsAt: number; lease: AdaptiveLease }> = [];
  private head = 0;
  private nextArrival = 0;

  constructor(
    strategy: AdaptiveStrategy,
    { capacity = 50, baseMs = 20, load = 2, floor = 1 } = {},
    private readonly options = { load },
  ) {
    this.capacity = capacity;
    this.baseMs = baseMs;
    const limits = this.limits;
    const recorded: AdaptiveStrategy = {
      get limit() {
        return strategy.limit;
      },
      get probeDue() {
        return strategy.probeDue;
      },
      update(sample: AdaptiveSample, probe?: boolean) {
        const limit = strategy.update(sample, probe);
        limits.push(limit);
        return limit;
      },
    };
    this.limiter = new AdaptiveLimiter({ strategy: recorded, now: () => this.now, floor, window: { minMs: 0 } });
  }

  get inflight(): number {
    return this.jobs.length - this.head;
  }

  /** Runs until the strategy has taken in `updates` windows in all. */
  runUntil(updates: number): void {
    while (this.limits.length < updates) this.next();
  }

  /**
   * Moves to the next event, an arrival or the end of the oldest request (all need the same work, so they end
   * in the order they started): exact, with no time step.
   */
  private next(): void {
    const n = this.inflight;
    const rate = n > 0 ? Math.min(1, this.capacity / n) : 1;
    const doneAt = n > 0 ? this.now + (this.jobs[this.head].endsAt - this.virtual) / rate : Infinity;
    if (this.nextArrival <= doneAt) {
      this.virtual += (this.nextArrival - this.now) * (n > 0 ? rate : 0);
      this.now = this.nextArrival;
      this.nextArrival += this.baseMs / (this.options.load * this.capacity);
      this.arrive();
    } else {
      this.virtual = this.jobs[this.head].endsAt;
      this.now = doneAt;
      this.jobs[this.head++].lease.settle('success');
      if (this.head > 4096) {
        this.jobs.splice(0, this.head);
        this.head = 0;
      }
    }
  }

  private arrive(): void {
    const lease = this.limiter.acquire();
    if (lease === undefined) {
      this.refused++;
      return;
    }
    this.admitted++;
    // Work is measured in virtual time, which runs at min(1, capacity / n): every request needs baseMs of it.
    this.jobs.push({ endsAt: this.virtual + this.baseMs, lease });
  }
}
