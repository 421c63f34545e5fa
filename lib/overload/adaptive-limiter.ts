import type { RateLimitAdaptiveOutcome, RateLimitCriticality } from '../interfaces/overload.interface';
import type { AdaptiveStrategy } from './adaptive-strategy';

/** How samples are grouped into windows before the strategy sees them (concurrency-limits' `WindowedLimit`). */
export interface AdaptiveWindowOptions {
  /** A window lasts until it has this many samples. @default 10 (Java's minimum) */
  minSamples?: number;
  /** A window lasts twice its fastest RTT, at least this long… @default 100 */
  minMs?: number;
  /** …and at most this long. @default 1000 */
  maxMs?: number;
}

/** What an {@link AdaptiveLimiter} is built from. */
export interface AdaptiveLimiterOptions {
  strategy: AdaptiveStrategy;
  /** Monotonic time in ms (`performance.now`; a test clock in tests). */
  now: () => number;
  /** The floor of the limit: a probe window admits at most `max(floor, ⌈L/10⌉)`. */
  floor: number;
  partitions?: Partial<Record<RateLimitCriticality, number>>;
  window?: AdaptiveWindowOptions;
}

/** A criticality's share of the limit (concurrency-limits' `Partition`). */
export class AdaptivePartition {
  busy = 0;
  limit = 0;

  constructor(readonly share: number) {}

  /** `max(1, ⌈total · share⌉)`, as Java rounds (the shares' limits may add up to more than the total). */
  update(total: number): void {
    this.limit = this.share > 0 ? Math.max(1, Math.ceil(total * this.share)) : 0;
  }
}

/** The samples of the current window (concurrency-limits' `AverageSampleWindow`). */
class SampleWindow {
  count = 0;
  sumRtt = 0;
  minRtt = Infinity;
  maxInflight = 0;
  dropped = false;

  add(rttMs: number, inflight: number, dropped: boolean): void {
    this.count++;
    this.sumRtt += rttMs;
    if (rttMs < this.minRtt) this.minRtt = rttMs;
    if (inflight > this.maxInflight) this.maxInflight = inflight;
    this.dropped ||= dropped;
  }
}

/**
 * One request admitted by an {@link AdaptiveLimiter}; settled exactly once (later calls do nothing). Its RTT
 * is the time from admission to settling, unless a sample is given.
 */
export class AdaptiveLease {
  private settled = false;

  constructor(
    private readonly limiter: AdaptiveLimiter,
    /** When it was admitted (the limiter's clock, ms). */
    readonly startedAt: number,
    /** Requests in flight once it was admitted, itself included. */
    readonly inflight: number,
    /** Its criticality's partition, when the limit is partitioned. */
    readonly partition: AdaptivePartition | undefined,
    /** Admitted during a probe window at a few requests in flight: its RTT is a no-load one. */
    readonly probe: boolean,
  ) {}

  /**
   * Ends the request: `'success'` measures its RTT, `'dropped'` (it timed out, or a dependency shed it) also
   * tells the strategy to back off, `'ignored'` (refused by another policy, fast-failed, cancelled) frees its
   * slot and measures nothing.
   */
  settle(outcome: RateLimitAdaptiveOutcome, rttMs?: number): void {
    if (this.settled) return;
    this.settled = true;
    this.limiter.release(this, outcome, rttMs);
  }
}

/**
 * A limit on the requests in flight in this process that follows the latency it measures: admits while fewer
 * than the strategy's limit are in flight, and feeds the strategy one window of completed requests at a
 * time. With partitions, a criticality is held to its share only while the whole limit is reached. When the
 * strategy asks for a probe, one window admits only a few requests so that their RTT is the no-load one.
 * Memory is constant: counters and one window, no per-request state but the lease the caller holds.
 */
export class AdaptiveLimiter {
  private inflightCount = 0;
  private readonly partitions: Map<RateLimitCriticality, AdaptivePartition> | undefined;
  private current = new SampleWindow();
  private nextUpdateAt = 0;
  private probing = false;
  private lastRttMs = 0;
  private readonly minSamples: number;
  private readonly minMs: number;
  private readonly maxMs: number;

  constructor(private readonly options: AdaptiveLimiterOptions) {
    const { partitions, window = {} } = options;
    this.minSamples = window.minSamples ?? 10;
    this.minMs = window.minMs ?? 100;
    this.maxMs = window.maxMs ?? 1000;
    if (partitions) {
      this.partitions = new Map();
      for (const criticality of ['critical', 'default', 'sheddable'] as const) {
        this.partitions.set(criticality, new AdaptivePartition(partitions[criticality] ?? 0));
      }
      this.updatePartitions();
    }
  }

  /** The limit in force: the strategy's, or a probe window's smaller one. */
  get limit(): number {
    const limit = this.options.strategy.limit;
    return this.probing ? this.probeLimit(limit) : limit;
  }

  /** The strategy's limit, probe or not (what `RateLimit-Policy` states). */
  get strategyLimit(): number {
    return this.options.strategy.limit;
  }

  get inflight(): number {
    return this.inflightCount;
  }

  /** The average RTT of the last window the strategy took in (ms); 0 before the first. */
  get recentRttMs(): number {
    return this.lastRttMs;
  }

  /** Requests of `criticality` in flight, when the limit is partitioned. */
  inflightOf(criticality: RateLimitCriticality): number {
    return this.partitions?.get(criticality)?.busy ?? 0;
  }

  /** Admits one request, or answers `undefined` when the limit (or, at the limit, its class's share) is reached. */
  acquire(criticality: RateLimitCriticality = 'default'): AdaptiveLease | undefined {
    const limit = this.limit;
    const full = this.inflightCount >= limit;
    const partition = this.partitions?.get(criticality);
    if (full && (partition === undefined || partition.busy >= partition.limit)) return undefined;
    if (partition) partition.busy++;
    this.inflightCount++;
    return new AdaptiveLease(this, this.options.now(), this.inflightCount, partition, this.probing && !full);
  }

  /** Called by {@link AdaptiveLease.settle}. */
  release(lease: AdaptiveLease, outcome: RateLimitAdaptiveOutcome, rttMs?: number): void {
    this.inflightCount--;
    if (lease.partition) lease.partition.busy--;
    if (outcome === 'ignored') return;
    const now = this.options.now();
    const rtt = rttMs ?? now - lease.startedAt;
    if (!(rtt > 0)) return;
    // During a probe only probe requests are measured: the others started at full concurrency.
    if (this.probing !== lease.probe) return;
    this.current.add(rtt, lease.inflight, outcome === 'dropped');
    // Unlike Java's WindowedLimit, a window short of samples is extended rather than discarded: at a small
    // limit and a long RTT, discarding would leave the limit where it is for good.
    if (now < this.nextUpdateAt || this.current.count < this.minSamples) return;
    const window = this.current;
    this.current = new SampleWindow();
    this.nextUpdateAt = now + Math.min(Math.max(window.minRtt * 2, this.minMs), this.maxMs);
    this.update(window);
  }

  private update(window: SampleWindow): void {
    const { strategy } = this.options;
    const before = strategy.limit;
    const rttMs = window.sumRtt / window.count;
    this.lastRttMs = rttMs;
    strategy.update({ rttMs, inflight: window.maxInflight, dropped: window.dropped }, this.probing);
    this.probing = strategy.probeDue;
    if (strategy.limit !== before) this.updatePartitions();
  }

  private probeLimit(limit: number): number {
    return Math.max(1, this.options.floor, Math.ceil(limit / 10));
  }

  private updatePartitions(): void {
    if (!this.partitions) return;
    const total = this.options.strategy.limit;
    for (const partition of this.partitions.values()) partition.update(total);
  }
}
