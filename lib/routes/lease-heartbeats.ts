import type { RateLimitStore, RateLimitCall } from '../stores/store.interface';
import { Verdict } from '../stores/verdicts';
import { leaseRenewal } from '../service/lease';
import { IntervalWarning } from '../shared/interval-warning';
import { charged } from '../pipeline/charges';
import type { RouteOutcome } from './decide-route';
import type { RoutePlan } from './route-plan';

/** One held lease being kept alive. */
interface Beat {
  /** The lease's call with its units as a negative cost: a renewal (see concurrency.lua). */
  renewal: RateLimitCall;
  /** A third of the lease's window, ms. */
  everyMs: number;
  /** When its next renewal is due (the clock's ms). */
  dueAt: number;
  /** Its work has ended, the lease is gone, or the app is closing: it is renewed no more. */
  stopped: boolean;
}

const NOTHING_TO_STOP = (): void => undefined;

/**
 * Keeps the `concurrency` leases of HTTP routes and GraphQL operations held while their work runs: a handler
 * that outlives its lease's `window` would otherwise lose its slot to the next request while it still works.
 * Each lease the store took is renewed every third of its window (a renewal moves its expiry to the store's
 * now + window, as `lease.extend()` does) until its work has ended — the response is over and the handler
 * has settled — when the guard stops the renewals and releases the lease. A process that dies stops
 * renewing, so its leases still expire after `window`.
 *
 * One timer serves every lease, set for the soonest renewal due and only while some lease is held (none
 * per request), `unref`'d, and cleared at shutdown. A renewal the store fails (an outage) is tried again a
 * third of a window later; one that finds the lease gone (it expired meanwhile) ends that lease's renewals.
 */
export class LeaseHeartbeats {
  /** Beats by interval, each line in due order: a beat joins its line at now + interval. Stopped ones leave lazily. */
  private readonly lines = new Map<number, Beat[]>();
  private readonly live = new Set<Beat>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private closed = false;
  private readonly warning = new IntervalWarning('RateLimitGuard');

  constructor(
    private readonly store: RateLimitStore,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Leases kept alive now. */
  get size(): number {
    return this.live.size;
  }

  /**
   * Starts renewing the leases `outcome` took on `plan`'s `concurrency` policies (only those the store
   * {@link charged}: a fallback's answer holds nothing); returns what stops it, to call once the work has ended.
   */
  keepRoute(plan: RoutePlan, outcome: RouteOutcome): () => void {
    const leases = outcome.calls.filter(
      (call, i) => plan.policies[i].compiled.algorithm.name === 'concurrency' && charged(outcome.decisions[i], call),
    );
    return this.keep(leases);
  }

  /** Starts renewing each of `leases` (calls that took a lease) every third of its window; returns what stops it. */
  keep(leases: readonly RateLimitCall[]): () => void {
    if (this.closed || leases.length === 0) return NOTHING_TO_STOP;
    const now = this.clock();
    const beats = leases.map((call) => {
      const everyMs = Math.max(1, Math.floor(call.params.windowMs / 3));
      const beat: Beat = { renewal: leaseRenewal(call), everyMs, dueAt: now + everyMs, stopped: false };
      this.live.add(beat);
      this.lineOf(everyMs).push(beat);
      return beat;
    });
    this.arm();
    return () => {
      for (const beat of beats) this.stop(beat);
    };
  }

  /** Stops every renewal and the timer (application shutdown); nothing is kept alive from now on. */
  close(): void {
    this.closed = true;
    for (const beat of this.live) beat.stopped = true;
    this.live.clear();
    this.idle();
  }

  private stop(beat: Beat): void {
    if (beat.stopped) return;
    beat.stopped = true;
    this.live.delete(beat);
    if (this.live.size === 0) this.idle();
  }

  /** No lease is held: drop the stopped beats still in line, and the timer with them. */
  private idle(): void {
    this.lines.clear();
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private lineOf(everyMs: number): Beat[] {
    let line = this.lines.get(everyMs);
    if (!line) {
      line = [];
      this.lines.set(everyMs, line);
    }
    return line;
  }

  /** Sets the one timer for the soonest renewal due, unless it is already set for that or sooner. */
  private arm(): void {
    let next = Infinity;
    for (const line of this.lines.values()) if (line.length > 0 && line[0].dueAt < next) next = line[0].dueAt;
    if (next === Infinity || (this.timer && this.timerAt <= next)) return;
    clearTimeout(this.timer);
    this.timerAt = next;
    this.timer = setTimeout(() => this.beat(), Math.max(0, next - this.clock()));
    this.timer.unref();
  }

  /** Sends every renewal due; each beat rejoins its line once its renewal has answered. */
  private beat(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.clock();
    for (const line of this.lines.values()) {
      while (line.length > 0 && line[0].dueAt <= now) {
        const beat = line.shift()!;
        if (!beat.stopped) void this.renew(beat);
      }
    }
    this.arm();
  }

  private async renew(beat: Beat): Promise<void> {
    try {
      const { verdicts } = await this.store.decide([beat.renewal], 'consume');
      // Not held any more (it expired while the store was away): nothing left to keep. A fallback's answer
      // (`Verdict.StoreUnavailable`) says nothing about the lease, so the next renewal asks again.
      if (!verdicts[0].allowed && verdicts[0].reason !== Verdict.StoreUnavailable) this.stop(beat);
    } catch (error) {
      this.warning.warn(
        () =>
          `could not renew a concurrency lease with the store (it expires after its window unless a later renewal succeeds): ${(error as Error)?.message ?? String(error)}`,
      );
    }
    if (beat.stopped) return;
    beat.dueAt = this.clock() + beat.everyMs;
    this.lineOf(beat.everyMs).push(beat);
    this.arm();
  }
}
