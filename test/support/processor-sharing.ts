import type { AdaptiveSample, AdaptiveStrategy } from '../../lib/overload/adaptive-strategy';
import { AdaptiveLimiter, type AdaptiveLease, type AdaptiveWindowOptions } from '../../lib/overload/adaptive-limiter';

/**
 * A simulated server that shares its capacity between the requests in flight (processor sharing): up to
 * `capacity` requests each take `baseMs`; beyond that each runs `capacity / n` as fast, so the RTT is
 * `baseMs · max(1, n / capacity)`. Requests arrive at `load ×` what it can serve, at even intervals, through
 * an AdaptiveLimiter; time is simulated event by event, never read from the machine. `load`, `capacity` and
 * `baseMs` may change between runs (a step in load, a slower dependency).
 */
export class ProcessorSharingRun {
  now = 0;
  capacity: number;
  baseMs: number;
  /** Offered load as a multiple of what the server can serve. */
  load: number;
  readonly limiter: AdaptiveLimiter;
  /** The strategy's limit after each update it took in. */
  readonly limits: number[] = [];
  admitted = 0;
  refused = 0;
  private virtual = 0;
  private readonly jobs: Array<{ endsAt: number; lease: AdaptiveLease }> = [];
  private head = 0;
  private nextArrival = 0;
  private readonly onEnd?: (rttMs: number) => void;

  constructor(
    strategy: AdaptiveStrategy,
    {
      capacity = 50,
      baseMs = 20,
      load = 2,
      floor = 1,
      window = { minMs: 0 },
      onEnd,
    }: {
      capacity?: number;
      baseMs?: number;
      load?: number;
      floor?: number;
      /** The limiter's windows; by default as short as 10 samples make them. */
      window?: AdaptiveWindowOptions;
      /** Told each request's RTT (ms) as it ends. */
      onEnd?: (rttMs: number) => void;
    } = {},
  ) {
    this.capacity = capacity;
    this.baseMs = baseMs;
    this.load = load;
    this.onEnd = onEnd;
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
    this.limiter = new AdaptiveLimiter({ strategy: recorded, now: () => this.now, floor, window });
  }

  get inflight(): number {
    return this.jobs.length - this.head;
  }

  /** Runs until the strategy has taken in `updates` windows in all. */
  runUntil(updates: number): void {
    while (this.limits.length < updates) this.next();
  }

  /** Runs every event before `ms` on the simulated clock: the state then is the state at `ms`. */
  runUntilTime(ms: number): void {
    while (Math.min(this.nextArrival, this.nextEndAt()) < ms) this.next();
  }

  /** When the oldest request in flight ends at the current rate, or Infinity when none is. */
  private nextEndAt(): number {
    const n = this.inflight;
    if (n === 0) return Infinity;
    return this.now + (this.jobs[this.head].endsAt - this.virtual) / Math.min(1, this.capacity / n);
  }

  /**
   * Moves to the next event, an arrival or the end of the oldest request (all need the same work, so they end
   * in the order they started): exact, with no time step.
   */
  private next(): void {
    const n = this.inflight;
    const rate = n > 0 ? Math.min(1, this.capacity / n) : 1;
    const doneAt = this.nextEndAt();
    if (this.nextArrival <= doneAt) {
      this.virtual += (this.nextArrival - this.now) * (n > 0 ? rate : 0);
      this.now = this.nextArrival;
      this.nextArrival += this.baseMs / (this.load * this.capacity);
      this.arrive();
    } else {
      this.virtual = this.jobs[this.head].endsAt;
      this.now = doneAt;
      const { lease } = this.jobs[this.head++];
      lease.settle('success');
      this.onEnd?.(this.now - lease.startedAt);
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
