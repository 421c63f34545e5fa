import { deniedDecision } from '../stores/lockouts';
import type { DenyRead, RateLimitCall, StoreDecision } from '../stores/store.interface';

/** A deny held here: its end on the store's clock, and its reason ('' for none). */
export interface Denial {
  until: number;
  note: string;
}

/**
 * The denies in force that {@link RateLimitDenyList} holds in front of a remote store, by their 1.0 deny key
 * (what a decision's calls name), and the store's clock as of the last read or write of the channel: a denied
 * tracker's decisions are answered from here, with no round trip. A deny that ended is dropped when asked
 * about, and every one that ended is swept at the first read after the soonest end. Kept apart so the deny
 * list reads as how the denies travel: its channel, its writes, and the store's own deny keys.
 */
export class HeldDenies {
  private readonly denies = new Map<string, Denial>();
  /** The store's clock minus the local one at the last read or write, ms. */
  private offset = 0;
  /** The soonest end of a deny held, store ms. */
  private nextEnd = Infinity;

  /** @param clock local time in ms (the deny list's) */
  constructor(private readonly clock: () => number) {}

  /** How many denies are held (some may have ended, not swept yet). */
  get size(): number {
    return this.denies.size;
  }

  /**
   * The decision of `calls` when their tracker is denied: every policy rejected, as the store replied in 1.0
   * (the deny's reason, retry after its end). `undefined` otherwise. While no deny is held, one property read.
   */
  answer(calls: readonly RateLimitCall[]): StoreDecision | undefined {
    const held = this.denies;
    if (held.size === 0) return undefined;
    const denyKey = calls[0]?.denyKey;
    const denial = denyKey === undefined ? undefined : held.get(denyKey);
    if (denial === undefined) return undefined;
    const now = this.clock() + this.offset;
    if (denial.until <= now) {
      held.delete(denyKey!);
      return undefined;
    }
    return deniedDecision(calls.length, Math.ceil(denial.until - now), Math.floor(now), denial.note);
  }

  /** The deny of `denyKey` in force now on the store's clock, or `undefined`. */
  inForce(denyKey: string): Denial | undefined {
    const denial = this.denies.get(denyKey);
    return denial === undefined || denial.until <= this.clock() + this.offset ? undefined : denial;
  }

  /** The store's clock reads `nowMs` now (a read's or a write's `TIME`). */
  syncClock(nowMs: number): void {
    this.offset = nowMs - this.clock();
  }

  /**
   * Applies the changes of a read of the channel made at `nowMs` on the store's clock: what changed, or every
   * deny; then drops the denies that ended.
   */
  apply(changes: DenyRead['changes'], nowMs: number): void {
    const held = this.denies;
    this.syncClock(nowMs);
    if (changes !== undefined) {
      if (changes.complete) {
        held.clear();
        this.nextEnd = Infinity;
      }
      for (const [field, value] of changes.entries) {
        if (value === '') held.delete(field);
        else {
          const bar = value.indexOf('|');
          this.hold(field, Number(bar < 0 ? value : value.slice(0, bar)), bar < 0 ? '' : value.slice(bar + 1), nowMs);
        }
      }
    }
    if (nowMs >= this.nextEnd) this.sweep(nowMs);
  }

  /** Holds the deny of `field` until `until` with its `note` (store ms); one ended by `nowMs` is dropped instead. */
  hold(field: string, until: number, note: string, nowMs: number): void {
    const held = this.denies;
    if (!(until > nowMs)) {
      held.delete(field);
      return;
    }
    held.set(field, { until, note });
    if (until < this.nextEnd) this.nextEnd = until;
  }

  /** Drops the deny of `field` (lifted). */
  delete(field: string): void {
    this.denies.delete(field);
  }

  /** Drops the denies that ended (each has been answered as ended already, if asked about). */
  private sweep(nowMs: number): void {
    let next = Infinity;
    for (const [field, { until }] of this.denies) {
      if (until <= nowMs) this.denies.delete(field);
      else if (until < next) next = until;
    }
    this.nextEnd = next;
  }
}
