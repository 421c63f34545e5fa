import { FixedWindowAlgorithm } from '../algorithms/fixed-window';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { Duration } from '../interfaces/policy.interface';
import { describeValue } from '../shared/describe-value';
import { parseDuration } from '../policy/duration';
import { LruMap } from '../shared/lru-map';
import { deniedDecision, MAX_LOCKOUT_MS } from '../stores/lockouts';
import type { RateLimitCall, RateLimitStore, StoreDecision } from '../stores/store.interface';
import { Verdict } from '../stores/verdicts';

/** A tracker's deny, as {@link RateLimiterService.denied} reports it. */
export interface RateLimitDenial {
  /** When the deny ends, on the store's clock (Redis `TIME`). */
  until: Date;
  /** The reason given to `deny()`, when there was one. */
  reason?: string;
}

/**
 * Longest an instance answers a denied tracker from what it learnt before asking the store again, ms: an
 * `allow()` made on another instance takes effect everywhere within this.
 */
export const DENY_RECHECK_MS = 1_000;
/** Most denied trackers an instance remembers (each entry is its deny key, at most ~240 characters, and three numbers). */
const MAX_KNOWN = 10_000;
/** Longest reason kept with a deny, in UTF-16 code units. */
const MAX_REASON_LENGTH = 256;
/** Half of a surrogate pair on its own: Redis's JSON decoder rejects it (a pair is one code point with `u`). */
const LONE_SURROGATE = /\p{Surrogate}/u;

/** A deny this instance learnt, on its local clock. */
interface Known {
  /** When the deny ends, local ms. */
  until: number;
  /** After this, decisions ask the store again, local ms. */
  recheckAt: number;
  /** The store's clock minus the local one when it was learnt, ms (a local answer's `nowMs`). */
  offset: number;
}

/**
 * The deny list: trackers rejected by every policy of every route and every service call until a time,
 * shared by every instance through the store (one key per denied tracker, `<prefix>:{<tracker>}:deny`, read
 * by every decision in the same script call).
 *
 * In front of a remote store, each instance also remembers the denied trackers it has learnt (from a
 * decision's reply, or its own `deny()`), and answers their decisions itself, with no round trip, until
 * {@link DENY_RECHECK_MS} has passed (or the deny has ended); then the next decision asks the store again.
 * When the store is down and a fallback answers, a tracker known to be denied is still rejected. Bounded: at
 * most 10,000 trackers (least recently used forgotten first), and entries come only from the store's
 * denies, never from what a client sends. An in-process store (the memory store) answers denies itself.
 */
export class RateLimitDenyList {
  private readonly known: LruMap<Known> | undefined;
  /** The algorithm of the calls that write and read deny keys (a peek of cost 0 that no counter ever holds). */
  private readonly probeAlgorithm = new FixedWindowAlgorithm();

  /** @param clock local time in ms, for the cache only; monotonic by default (a wall clock can step). */
  constructor(
    private readonly store: RateLimitStore,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.known = store.inProcess ? undefined : new LruMap<Known>();
  }

  /** Whether this instance knows any denied tracker (the engine reviews allowed answers only then). */
  get active(): boolean {
    return this.known !== undefined && this.known.size > 0;
  }

  /**
   * The decision of `calls` when their tracker is known to be denied and its re-check is not due: every
   * policy rejected, exactly as the store would reply. `undefined` otherwise (ask the store). With no denied
   * tracker known, this is one property read.
   */
  answer(calls: readonly RateLimitCall[]): StoreDecision | undefined {
    const known = this.known;
    if (known === undefined || known.size === 0) return undefined;
    const denyKey = calls[0]?.denyKey;
    const entry = denyKey === undefined ? undefined : known.get(denyKey);
    if (entry === undefined) return undefined;
    const now = this.clock();
    // recheckAt is never past until: an ended deny is asked about too.
    if (now >= entry.recheckAt) return undefined;
    return deniedDecision(calls.length, Math.ceil(entry.until - now), Math.floor(now + entry.offset), '');
  }

  /**
   * What the engine makes of the store's `result` for `calls`: a deny in it is learnt; an answer without one
   * forgets a deny known for the tracker (it was lifted); a fallback's answer (the store did not answer) for
   * a tracker known to be denied becomes a rejection.
   */
  review(calls: readonly RateLimitCall[], result: StoreDecision): StoreDecision {
    const known = this.known;
    const denyKey = calls[0]?.denyKey;
    const first = result.verdicts[0];
    if (known === undefined || denyKey === undefined || first === undefined) return result;
    if (first.reason === Verdict.Denied) {
      const entry = known.get(denyKey);
      // A local answer, or a reply to a call sent before the deny was learnt, must not put the re-check off.
      if (entry === undefined || this.clock() >= entry.recheckAt) this.learn(denyKey, first.retryAfterMs, result.nowMs);
      return result;
    }
    const entry = known.size === 0 ? undefined : known.get(denyKey);
    if (entry === undefined) return result;
    const now = this.clock();
    if (first.reason !== Verdict.StoreUnavailable || now >= entry.until) {
      known.delete(denyKey);
      return result;
    }
    return deniedDecision(calls.length, Math.ceil(entry.until - now), Math.floor(now + entry.offset), '');
  }

  /**
   * Denies the tracker whose deny key is `denyKey` until `until` (a duration from now, or a date on the
   * store's clock), unless a deny in force ends later; `reason` is kept with it. This instance knows it at
   * once (as the store has it after the call: a longer deny in force stays).
   */
  async deny(denyKey: string, until: Duration | Date, reason: string | undefined): Promise<void> {
    const note = validReason(reason);
    const ms = until instanceof Date ? await this.msUntil(denyKey, until) : denyLength(until);
    await this.store.block([this.probe(denyKey, denyKey, ms, note)], ms);
    await this.denied(denyKey);
  }

  /** Lifts the deny of `denyKey`'s tracker: at once here, within {@link DENY_RECHECK_MS} on other instances. */
  async allow(denyKey: string): Promise<void> {
    this.known?.delete(denyKey);
    await this.store.delete([denyKey]);
    // A reply that arrived while the delete was on its way may have taught the deny again.
    this.known?.delete(denyKey);
  }

  /** The deny of `denyKey`'s tracker as the store has it now (one peek), or `undefined`; learnt here too. */
  async denied(denyKey: string): Promise<RateLimitDenial | undefined> {
    const { nowMs, verdicts } = await this.peek(denyKey, 'denied');
    const [verdict] = verdicts;
    if (verdict.reason !== Verdict.Denied) {
      this.known?.delete(denyKey);
      return undefined;
    }
    this.learn(denyKey, verdict.retryAfterMs, nowMs);
    const until = new Date(nowMs + verdict.retryAfterMs);
    return verdict.note === undefined ? { until } : { until, reason: verdict.note };
  }

  private learn(denyKey: string, leftMs: number, storeNowMs: number): void {
    const known = this.known;
    if (known === undefined) return;
    const now = this.clock();
    if (known.size >= MAX_KNOWN && known.get(denyKey) === undefined) known.delete(known.oldest()!);
    known.set(denyKey, { until: now + leftMs, recheckAt: now + Math.min(leftMs, DENY_RECHECK_MS), offset: storeNowMs - now });
  }

  /** ms from the store's now until `date` (one peek: a date is on the store's clock, as every deny's end is). */
  private async msUntil(denyKey: string, date: Date): Promise<number> {
    const at = date.getTime();
    if (!Number.isFinite(at)) throw new RateLimitConfigError(`deny: until: ${String(date)} is not a valid date.`);
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
   * a peek reads the deny key first and, when no deny is in force, checks a counter that is never written.
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

/** A deny's duration in ms: a positive duration of at most 100 years. */
function denyLength(until: Duration): number {
  return bounded(parseDuration(until, 'deny: until'), `until: ${describeValue(until)}`);
}

function bounded(ms: number, what: string): number {
  if (ms > MAX_LOCKOUT_MS) {
    throw new RateLimitConfigError(`deny: ${what} is more than 100 years away; deny for at most ${MAX_LOCKOUT_MS} ms.`);
  }
  return Math.ceil(ms);
}

/** A deny's reason: a string of at most 256 characters with no lone surrogate, or '' for none. */
function validReason(reason: string | undefined): string {
  if (reason === undefined) return '';
  const fail = (message: string) => new RateLimitConfigError(`deny: reason: ${message}`);
  if (typeof reason !== 'string') throw fail(`${describeValue(reason)} must be a string.`);
  if (reason.length > MAX_REASON_LENGTH) throw fail(`${reason.length} characters; at most ${MAX_REASON_LENGTH} are kept.`);
  if (LONE_SURROGATE.test(reason))
    throw fail(`${JSON.stringify(reason)} has half of a UTF-16 surrogate pair alone, which Redis cannot store.`);
  return reason;
}
