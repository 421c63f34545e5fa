import { FixedWindowAlgorithm } from '../algorithms/fixed-window';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { Duration } from '../interfaces/policy.interface';
import { MAX_DENIES } from '../stores/deny-bounds';
import type {
  DenyRead,
  DenyWrite,
  DenyWriteResult,
  OverrideKeys,
  RateLimitCall,
  RateLimitStore,
  StoreDecision,
} from '../stores/store.interface';
import { DenyCarryOver } from './deny-carry-over';
import { bounded, dateOf, denyLength, storeFailed, validReason } from './deny-input';
import { HeldDenies } from './held-denies';

export { MAX_DENIES };
import { Verdict } from '../stores/verdicts';

/** A tracker's deny, as {@link RateLimiterService.denied} reports it. */
export interface RateLimitDenial {
  /** When the deny ends, on the store's clock (Redis `TIME`). */
  until: Date;
  /** The reason given to `deny()`, when there was one. */
  reason?: string;
}

/**
 * How the deny list reaches the channel it shares with the runtime overrides (given by {@link RateLimitOverrides},
 * which polls it): the channel's keys, the queue that keeps reads and writes in order (a read sent before a
 * write must not be applied after it), and a read now.
 */
export interface DenyChannel {
  keys: OverrideKeys;
  exclusive<T>(work: () => Promise<T>): Promise<T>;
  refresh(): Promise<void>;
  /** How long an instance counts as live after its last poll, ms (the heartbeat's). */
  liveMs: number;
}

/**
 * The deny list: trackers rejected by every policy of every route and every service call until a time.
 *
 * On a remote store (Redis), every instance holds every deny in force (at most {@link MAX_DENIES}) and answers a
 * denied tracker's decisions itself, with no round trip, also while the store is down; no decision script reads a
 * deny key. The denies travel through the channel the runtime overrides use (see denies-write.lua and
 * overrides-read.lua): the instance that calls `deny()` / `allow()` applies it at once, every other one at its
 * next poll (every 500 ms, so within 1 s), reading only what changed. A deny's end is on the store's clock: each
 * read's `TIME` turns it into this instance's. `deny()` also writes the tracker's 1.0 deny key
 * (`<prefix>:{<tracker>}:deny`), which 1.0 instances read during a rolling upgrade, and `allow()` deletes it;
 * the denies 1.0 instances wrote are carried over ({@link DenyCarryOver}).
 *
 * An in-process store (the memory store) answers denies itself, exactly: nothing is held in front of it.
 */
export class RateLimitDenyList {
  /** The denies in force by their 1.0 deny key (what a decision's calls name), on a remote store only. */
  private readonly held: HeldDenies | undefined;
  /** The channel's sequence number the held denies match; `undefined` until the first read. */
  private seq: string | undefined;
  private channel: DenyChannel | undefined;
  private carryOver: DenyCarryOver | undefined;
  /** The algorithm of the calls that write and read deny keys (a peek of cost 0 that no counter ever holds). */
  private readonly probeAlgorithm = new FixedWindowAlgorithm();

  /** @param clock local time in ms; monotonic by default (a wall clock can step). */
  constructor(
    private readonly store: RateLimitStore,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.held = store.inProcess ? undefined : new HeldDenies(clock);
  }

  /** Whether any deny is held here (the engine reviews a fallback's answers only then). */
  get active(): boolean {
    return this.held !== undefined && this.held.size > 0;
  }

  /** The channel's sequence number held ('' for none): what the next poll asks about. */
  get known(): string | undefined {
    return this.seq;
  }

  /** Connects the list to its channel (the overrides' poll), once; the carry-over of 1.0 deny keys runs through it. */
  connect(channel: DenyChannel, prefix: string): void {
    this.channel = channel;
    const write = (w: DenyWrite) => this.write(w);
    this.carryOver = new DenyCarryOver(this.store, { write, prefix, liveMs: channel.liveMs }, this.clock);
  }

  /**
   * The decision of `calls` when their tracker is denied: every policy rejected, as the store replied in 1.0
   * (the deny's reason, retry after its end). `undefined` otherwise (see {@link HeldDenies.answer}).
   */
  answer(calls: readonly RateLimitCall[]): StoreDecision | undefined {
    return this.held?.answer(calls);
  }

  /**
   * A fallback's answer (the store did not answer) for a tracker denied meanwhile becomes a rejection; any
   * other answer passes.
   */
  review(calls: readonly RateLimitCall[], result: StoreDecision): StoreDecision {
    if (result.verdicts[0]?.reason !== Verdict.StoreUnavailable) return result;
    return this.answer(calls) ?? result;
  }

  /**
   * Denies the tracker whose deny key is `denyKey` until `until` (a duration from now, or a date on the
   * store's clock), unless a deny in force ends later; `reason` is kept with it. Applied here at once.
   */
  async deny(denyKey: string, until: Duration | Date, reason: string | undefined): Promise<void> {
    const note = validReason(reason);
    const held = this.held;
    if (held === undefined) {
      const ms = until instanceof Date ? await this.msUntil(denyKey, until) : denyLength(until);
      await this.store.block([this.probe(denyKey, denyKey, ms, note)], ms);
      return;
    }
    const at = until instanceof Date ? dateOf(until) : undefined;
    const lengthMs = at === undefined ? denyLength(until as Duration) : 0;
    const channel = this.connected('deny');
    const result = await channel.exclusive(async () => {
      const written = await this.write({ op: 'deny', field: denyKey, lengthMs, untilMs: at ?? 0, reason: note }, 'deny');
      if (written.status === 1) {
        throw new RateLimitConfigError(
          `deny: until: ${new Date(at!).toISOString()} is not in the future (the store's clock reads ${new Date(written.nowMs).toISOString()}).`,
        );
      }
      if (written.status === 2) {
        throw new RateLimitConfigError(
          `deny: ${MAX_DENIES} trackers are denied already, the most kept (every instance holds them all); allow() some, or wait for some to end, before denying more.`,
        );
      }
      held.syncClock(written.nowMs);
      held.hold(denyKey, written.a, written.b, written.nowMs);
      this.caughtUp(written.seq);
      return written;
    });
    // The 1.0 deny key, which 1.0 instances read during a rolling upgrade, with the deny now in force.
    const ms = result.a - result.nowMs;
    await this.store.block([this.probe(denyKey, denyKey, ms, result.b)], ms).catch((error: unknown) => {
      throw storeFailed('deny', 'the deny is in force on 1.1 instances; 1.0 instances may not see it (call again)', error);
    });
  }

  /** Lifts the deny of `denyKey`'s tracker: at once here, within 1 s on the other instances. */
  async allow(denyKey: string): Promise<void> {
    const held = this.held;
    if (held === undefined) {
      await this.store.delete([denyKey]);
      return;
    }
    held.delete(denyKey);
    const channel = this.connected('allow');
    // The 1.0 key first: a carry-over running now then cannot bring the deny back.
    await this.store.delete([denyKey]);
    await channel.exclusive(async () => {
      const written = await this.write({ op: 'allow', field: denyKey }, 'allow');
      held.delete(denyKey);
      this.caughtUp(written.seq);
    });
  }

  /** The deny of `denyKey`'s tracker as the store has it now (one read), or `undefined`. */
  async denied(denyKey: string): Promise<RateLimitDenial | undefined> {
    if (this.held === undefined) return this.deniedInProcess(denyKey);
    await this.connected('denied')
      .refresh()
      .catch((error: unknown) => {
        throw new RateLimitStoreError(`denied: the rate-limit store did not answer; the deny list lives there.`, { cause: error });
      });
    const denial = this.held.inForce(denyKey);
    if (denial === undefined) return undefined;
    const until = new Date(denial.until);
    return denial.note === '' ? { until } : { until, reason: denial.note };
  }

  /**
   * Applies a read of the channel (inside the channel's queue) made at `nowMs` on the store's clock: what
   * changed, or every deny; then drops the denies that ended, and starts a carry-over of 1.0 keys when one is due.
   */
  apply(read: DenyRead, nowMs: number): void {
    const held = this.held;
    if (held === undefined) return;
    held.apply(read.changes, nowMs);
    this.seq = read.seq;
    this.carryOver?.due(read.carryOver);
  }

  /**
   * Carries the denies 1.0 instances wrote over into the channel now, unless none is due (see {@link DenyCarryOver});
   * true when it carried one (read the channel again to hold it).
   */
  carryOverNow(): Promise<boolean> {
    return this.carryOver?.now() ?? Promise.resolve(false);
  }

  /** After this instance's write: when no other change came between, the held sequence number moves on. */
  private caughtUp(seq: string): void {
    if (this.seq !== undefined && Number(seq) === Number(this.seq) + 1) this.seq = seq;
  }

  private connected(what: string): DenyChannel {
    if (this.channel === undefined || this.store.writeDenies === undefined) {
      throw new RateLimitConfigError(`${what}: this rate-limit store keeps no deny list (the memory and Redis stores do).`);
    }
    return this.channel;
  }

  /** One write to the channel; a failure is a {@link RateLimitStoreError} saying the change may or may not have been made. */
  private async write(write: DenyWrite, what = 'the carry-over of 1.0 deny keys'): Promise<DenyWriteResult> {
    try {
      return await this.store.writeDenies!(this.channel!.keys, write);
    } catch (error) {
      throw storeFailed(what, 'the change may or may not have been made (call again)', error);
    }
  }

  /** The memory store's deny, as it has it now (one peek). */
  private async deniedInProcess(denyKey: string): Promise<RateLimitDenial | undefined> {
    const { nowMs, verdicts } = await this.peek(denyKey, 'denied');
    const [verdict] = verdicts;
    if (verdict.reason !== Verdict.Denied) return undefined;
    const until = new Date(nowMs + verdict.retryAfterMs);
    return verdict.note === undefined ? { until } : { until, reason: verdict.note };
  }

  /** ms from the store's now until `date` (one peek: a date is on the store's clock, as every deny's end is). */
  private async msUntil(denyKey: string, date: Date): Promise<number> {
    const at = dateOf(date);
    const { nowMs } = await this.peek(denyKey, 'deny');
    if (at <= nowMs) {
      throw new RateLimitConfigError(
        `deny: until: ${date.toISOString()} is not in the future (the store's clock reads ${new Date(nowMs).toISOString()}).`,
      );
    }
    return bounded(at - nowMs, `until: ${date.toISOString()}`);
  }

  private async peek(denyKey: string, what: string): Promise<StoreDecision> {
    const result = await this.store.decide([this.probe(denyKey, `${denyKey}:none`, 0, '')], 'peek');
    if (result.verdicts[0].reason === Verdict.StoreUnavailable) {
      throw new RateLimitStoreError(`${what}: the rate-limit store did not answer; the deny list lives there.`);
    }
    return result;
  }

  /**
   * A call on the deny key alone: `block` writes its `blockKey` (the deny key) with `token` as its note;
   * on the memory store, a peek reads the deny key first and, when no deny is in force, checks a counter that
   * is never written.
   */
  private probe(denyKey: string, blockKey: string, ms: number, note: string): RateLimitCall {
    return {
      algorithm: this.probeAlgorithm,
      params: { limit: 1, windowMs: 1, burst: 1 },
      cost: 0,
      blockForMs: ms,
      stateKey: `${denyKey}:none`,
      blockKey,
      token: note,
      fallback: 'fail-closed',
      refundable: false,
      denyKey,
    };
  }
}
