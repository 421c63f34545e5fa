import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { StoreTimings } from '../stores/store.interface';

export type { StoreTimings };

/**
 * Who hears how the calls in flight end, one for all of them (a closure per call would be allocated on every
 * decision): exactly one of its methods is called per call, once, with the call's own context and the
 * monotonic time it was sent.
 */
export interface DeadlineWatcher<C> {
  answered(call: C, value: unknown, sentAt: number): void;
  failed(call: C, error: unknown, sentAt: number): void;
}

/** A call in flight: its deadline in store time, and its context for the watcher. */
interface Pending<C> {
  /** Monotonic ms when it was sent. */
  readonly sentAt: number;
  /** Store time (see {@link StoreDeadlines.storeNow}) past which it has missed its deadline. */
  readonly deadline: number;
  /**
   * The call's context until it settles, then undefined: an entry stays queued until the next tick, and must
   * not keep its caller's promise and calls alive that long (they would outlive young-generation collections).
   */
  call: C | undefined;
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
export class StoreDeadlines<C> {
  private readonly pending: Pending<C>[] = [];
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
    private readonly watcher: DeadlineWatcher<C>,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.every = Math.max(1, Math.min(10, Math.floor(timeoutMs / 4)));
  }

  /** Monotonic now less the stalls measured so far: the clock deadlines are judged on. */
  storeNow(): number {
    return this.clock() - this.stalledMs;
  }

  /**
   * Reports how `work` settles to the watcher (`answered` or `failed`, given `context`), or `failed` with a
   * RateLimitStoreError once `timeoutMs` of store time passed without an answer. Every decision passes here:
   * its cost is one entry and the two callbacks of `then`.
   */
  run(work: Promise<unknown>, context: C): void {
    const sentAt = this.clock();
    const startedStoreTime = sentAt - this.stalledMs;
    const entry: Pending<C> = { sentAt, deadline: startedStoreTime + this.timeoutMs, call: context };
    this.pending.push(entry);
    if (this.ticker === undefined) this.startTicker();
    work.then(
      (value) => {
        const call = entry.call;
        if (call === undefined) return;
        entry.call = undefined;
        this.latencies.add(this.storeNow() - startedStoreTime);
        this.watcher.answered(call, value, sentAt);
      },
      (error: unknown) => {
        const call = entry.call;
        if (call === undefined) return;
        entry.call = undefined;
        this.watcher.failed(call, error, sentAt);
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
      const call = entry.call;
      if (call === undefined) continue;
      entry.call = undefined;
      this.watcher.failed(call, new RateLimitStoreError('The rate-limit store was closed.'), entry.sentAt);
    }
  }

  private startTicker(): void {
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
    while (this.head < this.pending.length && (this.pending[this.head].call === undefined || this.pending[this.head].deadline <= cutoff)) {
      const entry = this.pending[this.head++];
      const call = entry.call;
      if (call === undefined) continue;
      entry.call = undefined;
      this.watcher.failed(
        call,
        new RateLimitStoreError(`The rate-limit store did not answer within storeTimeoutMs (${this.timeoutMs} ms).`),
        entry.sentAt,
      );
    }
    this.compact();
    if (this.pending.length === 0) this.stopTicker();
  }

  private dropSettled(): void {
    while (this.head < this.pending.length && this.pending[this.head].call === undefined) this.head++;
    this.compact();
  }

  /**
   * Drops the consumed head of the queue on every tick (a tick's calls, plus those still in flight, are moved).
   * Dropping it only once it was most of a long array kept settled entries through young-generation collections,
   * and the process could settle in a regime where every collection promoted megabytes (bench:node-path).
   */
  private compact(): void {
    if (this.head === this.pending.length) {
      this.pending.length = 0;
      this.head = 0;
    } else if (this.head > 0) {
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
