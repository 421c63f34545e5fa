import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { StoreTimings } from '../stores/store.interface';

export type { StoreTimings };

/** A call in flight: its deadline in store time, and how it ends. */
interface Pending {
  /** Monotonic ms when it was sent. */
  readonly sentAt: number;
  /** Store time (see {@link StoreDeadlines.storeNow}) past which it has missed its deadline. */
  readonly deadline: number;
  settled: boolean;
  readonly fail: (error: RateLimitStoreError) => void;
}

/** Recent samples kept for {@link StoreTimings} (a ring: bounded memory, percentiles only when asked). */
const SAMPLES = 1_024;

/**
 * Deadlines judged on what the store did, not on what this process did meanwhile. A deadline counts *store
 * time*: monotonic time less the event-loop delay this process had while calls were in flight (a tick that
 * fires late measures a stall: a GC pause, a slow handler, a saturated CPU). So a stall never turns an answer
 * that had already arrived into a failure, and a decision not yet sent because the loop was blocked is not late.
 * And when a deadline has passed, the call is failed only after the loop has read pending I/O once more
 * (`setImmediate` runs after the poll phase): a reply readable before the deadline is the decision.
 *
 * One timer for every call, running only while calls are in flight; nothing per call but its entry.
 */
export class StoreDeadlines {
  private readonly pending: Pending[] = [];
  private head = 0;
  private ticker: NodeJS.Timeout | undefined;
  private lastTick = 0;
  /** Event-loop delay measured while calls were in flight, in total (store time = clock − this). */
  private stalledMs = 0;
  private expiring = false;
  private readonly every: number;
  private readonly latencies = new RecentSamples();
  private readonly delays = new RecentSamples();

  constructor(
    readonly timeoutMs: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.every = Math.max(1, Math.min(10, Math.floor(timeoutMs / 4)));
  }

  /** Monotonic now less the stalls measured so far: the clock deadlines are judged on. */
  storeNow(): number {
    return this.clock() - this.stalledMs;
  }

  /**
   * Settles `work` through `onValue` / `onError` (each given the monotonic time the call was sent), or
   * `onError` with a RateLimitStoreError once `timeoutMs` of store time passed without an answer. Exactly one
   * of them is called, once.
   */
  run<T>(work: Promise<T>, onValue: (value: T, sentAt: number) => void, onError: (error: unknown, sentAt: number) => void): void {
    const sentAt = this.clock();
    const startedStoreTime = sentAt - this.stalledMs;
    const entry: Pending = {
      sentAt,
      deadline: startedStoreTime + this.timeoutMs,
      settled: false,
      fail: (error) => onError(error, sentAt),
    };
    this.pending.push(entry);
    this.startTicker();
    work.then(
      (value) => {
        if (entry.settled) return;
        entry.settled = true;
        this.latencies.add(this.storeNow() - startedStoreTime);
        onValue(value, sentAt);
      },
      (error: unknown) => {
        if (entry.settled) return;
        entry.settled = true;
        onError(error, sentAt);
      },
    );
  }

  /** The store's and the process's recent timings (for health checks and metrics; never on the request path). */
  timings(): StoreTimings {
    return {
      storeLatencyMs: this.latencies.summary(),
      eventLoopDelayMs: this.delays.summary(),
    };
  }

  /** Fails every call still in flight (the store is closing) and stops the timer. */
  close(): void {
    this.stopTicker();
    const entries = this.pending.splice(0);
    this.head = 0;
    for (const entry of entries) {
      if (entry.settled) continue;
      entry.settled = true;
      entry.fail(new RateLimitStoreError('The rate-limit store was closed.'));
    }
  }

  private startTicker(): void {
    if (this.ticker) return;
    this.lastTick = this.clock();
    this.ticker = setInterval(() => this.tick(), this.every);
    this.ticker.unref();
  }

  private stopTicker(): void {
    clearInterval(this.ticker);
    this.ticker = undefined;
  }

  private tick(): void {
    const now = this.clock();
    const late = now - this.lastTick - this.every;
    this.lastTick = now;
    this.dropSettled();
    const first = this.pending[this.head];
    // Nothing in flight: a stall since the last call settled delayed no call, so it is neither counted nor reported.
    if (first === undefined) {
      this.stopTicker();
      return;
    }
    this.delays.add(Math.max(0, late));
    if (late > 0) this.stalledMs += late;
    // Deadlines are all timeoutMs long, so entries are in deadline order. Fail only after the poll phase.
    if (first.deadline <= now - this.stalledMs && !this.expiring) {
      this.expiring = true;
      setImmediate(() => this.expire(now - this.stalledMs));
    }
  }

  /** Fails the calls whose deadline was at or before `cutoff` and that the last poll phase did not settle. */
  private expire(cutoff: number): void {
    this.expiring = false;
    while (this.head < this.pending.length && (this.pending[this.head].settled || this.pending[this.head].deadline <= cutoff)) {
      const entry = this.pending[this.head++];
      if (entry.settled) continue;
      entry.settled = true;
      entry.fail(new RateLimitStoreError(`The rate-limit store did not answer within storeTimeoutMs (${this.timeoutMs} ms).`));
    }
    this.compact();
    if (this.pending.length === 0) this.stopTicker();
  }

  private dropSettled(): void {
    while (this.head < this.pending.length && this.pending[this.head].settled) this.head++;
    this.compact();
  }

  /** Drops the consumed head of the queue once it is most of the array (amortised O(1) per call). */
  private compact(): void {
    if (this.head === this.pending.length) {
      this.pending.length = 0;
      this.head = 0;
    } else if (this.head > 1_024 && this.head * 2 > this.pending.length) {
      this.pending.splice(0, this.head);
      this.head = 0;
    }
  }
}

/** The last {@link SAMPLES} values of one measure, in a ring: bounded memory, percentiles only when asked. */
class RecentSamples {
  private readonly ring = new Float64Array(SAMPLES);
  private count = 0;

  add(value: number): void {
    this.ring[this.count++ % SAMPLES] = value;
  }

  summary(): { p50: number; p99: number; max: number } {
    const n = Math.min(this.count, SAMPLES);
    if (n === 0) return { p50: 0, p99: 0, max: 0 };
    const sorted = Array.from(this.ring.subarray(0, n)).sort((a, b) => a - b);
    const at = (q: number) => round(sorted[Math.min(n - 1, Math.floor(q * n))]);
    return { p50: at(0.5), p99: at(0.99), max: round(sorted[n - 1]) };
  }
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
