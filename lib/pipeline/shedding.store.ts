import { LocalLeases } from '../stores/memory/local-leases';
import { LruMap } from '../shared/lru-map';
import { decideSeen, StoreLayer, type AnswerWatcher } from './store-layer';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision } from '../stores/store.interface';
import { Verdict } from '../stores/verdicts';

interface Shed {
  /** Local time the rejection stops being certain, ms. */
  until: number;
  /** Local time the answer arrived, ms: never before the store decided, so the wait counted from it is never short. */
  at: number;
  /** The calls rejected: another cost, or a changed limit, gets another answer. */
  calls: readonly RateLimitCall[];
  decision: StoreDecision;
}

/**
 * Hot-key shedding: once the store rejects a request with `retryAfterMs = R`, the same request (same keys,
 * same cost, same limits) is answered here until R has passed, with R counted down. A rejection changes no
 * state, and without other requests only time changes the answer, so this is exact as long as nothing else
 * touches the key: every consume, refund and lockout this store passes on for one of its state keys forgets
 * the rejections remembered on it (an admission makes the wait longer, a refund shorter, a lockout longer), and
 * `reset`/`unblock` forget them all. What other instances do is not seen: their admissions can make a shed
 * retry too early, their refunds or resets a shed rejection needless, but never past R, after which the store
 * decides again (and shedding never admits anything). Refundable (`countOnly`) policies can free room at any
 * time and are never shed; a `concurrency` rejection is shed only while leases this process holds fill the
 * key by themselves ({@link LocalLeases}), and a release here forgets it. Under one abusive client the store
 * stops seeing its traffic. Bounded: at most `maxEntries` rejections (and leased keys) are remembered.
 */
export class SheddingStore extends StoreLayer {
  /** Oldest remembered first, so the bound evicts in O(1) (see LruMap). */
  private readonly shed = new LruMap<Shed>();
  /** Remembered rejections by the state keys they involve, so a consume, refund or lockout finds the ones it voids at once. */
  private readonly byStateKey = new Map<string, Set<string>>();
  private readonly leases: LocalLeases;
  /** What a consume's answer does here (see {@link decide}), told by the layer that settles it: no promise of ours. */
  private readonly answers: AnswerWatcher = {
    seen: (calls, decision) => {
      this.forget(calls);
      if (!decision.allowed && sheddable(calls)) this.remember(keyOf(calls), calls, decision);
    },
  };

  /**
   * @param clock local time in ms; only its differences are read. The default is monotonic and finer than
   * a millisecond: a wall clock can step, and one truncated to whole ms could date an answer up to 1 ms
   * before the store made it (a retry told 1 ms early).
   */
  constructor(
    inner: RateLimitStore,
    private readonly maxEntries: number,
    private readonly clock: () => number = () => performance.now(),
  ) {
    super(inner);
    this.leases = new LocalLeases(maxEntries);
  }

  override decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    const hit = this.shedAnswer(calls);
    if (hit) return Promise.resolve(hit);
    if (mode !== 'consume') return this.inner.decide(calls, mode);
    // Every consume, sheddable or not: a countOnly call can share its state key with a remembered rejection.
    // Answers come back in the order the store decided (one connection per node), so a rejection remembered
    // before this answer was decided before this consume, and is stale now if this one changed the key.
    if (!takesLeases(calls)) return decideSeen(this.inner, calls, mode, this.answers);
    // A lease's window is counted from before the call (see LocalLeases).
    const askedAt = this.clock();
    return this.inner.decide(calls, mode).then((d) => {
      this.answers.seen(calls, d);
      if (d.allowed) this.leases.took(calls, d, askedAt);
      return d;
    });
  }

  /**
   * A remembered rejection answers at once, with no promise (so does the inner store, when it can): an
   * abusive client costs neither Redis nor the event loop much.
   */
  override decideSync(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision | undefined {
    const hit = this.shedAnswer(calls);
    if (hit) return hit;
    const decision = this.inner.decideSync?.(calls, mode);
    // An in-process store may have admitted: forget as decide does (after a fallback's answer, which took
    // nothing from the store, forgetting only sheds less).
    if (decision && mode === 'consume') this.forget(calls);
    return decision;
  }

  /**
   * A refund makes room before retryAfter: forget the rejections it concerns, so the store decides again; and
   * once more when it is done, for rejections decided before it whose answers came in meanwhile.
   */
  override refund(calls: readonly RateLimitCall[]): Promise<void> {
    this.leases.released(calls);
    this.forget(calls);
    return this.inner.refund(calls).finally(() => this.forget(calls));
  }

  /** A penalty lengthens the wait: the same as {@link refund}. */
  override penalize(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    this.forget(calls);
    return super.penalize(calls).finally(() => this.forget(calls));
  }

  /** A lockout lengthens the wait: the same as {@link refund}. */
  override block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    this.forget(calls);
    return this.inner.block(calls, ms).finally(() => this.forget(calls));
  }

  /** `reset` and `unblock` are rare operator actions: forget every remembered rejection (now, and when done). */
  override delete(keys: readonly string[]): Promise<void> {
    this.forgetAll();
    this.leases.clear();
    return this.inner.delete(keys).finally(() => this.forgetAll());
  }

  override close(): Promise<void> {
    this.forgetAll();
    this.leases.clear();
    return this.inner.close();
  }

  /** The remembered rejection that answers `calls`, if any (nothing to look up, nor a key to make, while none is remembered). */
  private shedAnswer(calls: readonly RateLimitCall[]): StoreDecision | undefined {
    return this.shed.size > 0 && sheddable(calls) ? this.lookup(keyOf(calls), calls) : undefined;
  }

  private lookup(key: string, calls: readonly RateLimitCall[]): StoreDecision | undefined {
    const entry = this.shed.get(key);
    if (!entry) return undefined;
    const now = this.clock();
    if (now >= entry.until) {
      this.drop(key);
      return undefined;
    }
    if (!covers(entry.calls, calls)) return undefined;
    const elapsed = now - entry.at;
    // Whole ms, rounded up: a wait is never told shorter than it is.
    return {
      nowMs: entry.decision.nowMs + Math.floor(elapsed),
      allowed: false,
      verdicts: entry.decision.verdicts.map((v) => ({
        ...v,
        resetMs: Math.max(Math.ceil(v.resetMs - elapsed), 0),
        retryAfterMs: v.allowed || v.retryAfterMs < 0 ? v.retryAfterMs : Math.max(Math.ceil(v.retryAfterMs - elapsed), 1),
        // Counted down like the retry, never to 0 ("nothing used") while the remembered verdict stands.
        moreQuotaMs: v.moreQuotaMs > 0 ? Math.max(Math.ceil(v.moreQuotaMs - elapsed), 1) : 0,
      })),
    };
  }

  private remember(key: string, calls: readonly RateLimitCall[], decision: StoreDecision): void {
    if (decision.allowed) return;
    // Store-unavailable verdicts are fallbacks, not facts about the counter; a deny can be lifted by allow() on
    // any instance at any time, and the engine's deny list answers it in front of us.
    if (decision.verdicts.some((v) => v.reason === Verdict.StoreUnavailable || v.reason === Verdict.Denied)) return;
    const waits = decision.verdicts.filter((v) => !v.allowed).map((v) => v.retryAfterMs);
    let retry = waits.some((w) => w < 0) ? Infinity : Math.max(...waits);
    const now = this.clock();
    retry = Math.min(retry, this.leasesCertainFor(calls, decision, now));
    if (retry <= 0) return;
    this.drop(key);
    if (this.shed.size >= this.maxEntries) this.drop(this.shed.oldest()!);
    this.shed.set(key, { until: now + retry, at: now, calls, decision });
    for (const call of calls) {
      let keys = this.byStateKey.get(call.stateKey);
      if (!keys) this.byStateKey.set(call.stateKey, (keys = new Set()));
      keys.add(key);
    }
  }

  /**
   * How long the `concurrency` parts of a rejection stay certain, ms (Infinity without any): each must be a
   * rejection that leases held here explain alone, a lockout (only time lifts it), or one that can never
   * pass (cost above the limit).
   */
  private leasesCertainFor(calls: readonly RateLimitCall[], decision: StoreDecision, now: number): number {
    let certain = Infinity;
    calls.forEach((call, i) => {
      if (call.algorithm.name !== 'concurrency') return;
      const verdict = decision.verdicts[i];
      if (verdict.allowed) certain = 0;
      else if (verdict.reason === Verdict.Limited) certain = Math.min(certain, this.leases.certainFor(call, now));
    });
    return certain;
  }

  /** Forgets the rejections remembered on the state keys of `calls` (one Map lookup per call when there are none). */
  private forget(calls: readonly RateLimitCall[]): void {
    if (this.byStateKey.size === 0) return;
    for (const call of calls) {
      const keys = this.byStateKey.get(call.stateKey);
      // drop() deletes the current entry from this very set, which a Set's iteration allows.
      if (keys) for (const key of keys) this.drop(key);
    }
  }

  private forgetAll(): void {
    this.shed.clear();
    this.byStateKey.clear();
  }

  private drop(key: string): void {
    const entry = this.shed.get(key);
    if (!entry) return;
    this.shed.delete(key);
    for (const call of entry.calls) {
      const keys = this.byStateKey.get(call.stateKey);
      keys?.delete(key);
      if (keys?.size === 0) this.byStateKey.delete(call.stateKey);
    }
  }
}

/**
 * Whether the rejection of `rejected` is exactly the answer to `calls`: same keys, same costs, same holds, same
 * limits. (The wait depends on the cost: a dearer request waits longer or can never fit, a cheaper one may pass;
 * and a request holding less back, a more critical one, may pass a reserve that refused another.)
 */
function covers(rejected: readonly RateLimitCall[], calls: readonly RateLimitCall[]): boolean {
  // keyOf joins the state keys with '|', which a policy name or scope may contain: compare them one by one.
  return (
    calls.length === rejected.length &&
    calls.every((call, i) => {
      const was = rejected[i];
      const p = call.params;
      return (
        call.stateKey === was.stateKey &&
        call.cost === was.cost &&
        (call.hold ?? 0) === (was.hold ?? 0) &&
        p.limit === was.params.limit &&
        p.windowMs === was.params.windowMs &&
        p.burst === was.params.burst &&
        call.blockForMs === was.blockForMs
      );
    })
  );
}

/** Not calls whose units can come back by a refund at any time (`countOnly`); leases are checked when remembered. */
function sheddable(calls: readonly RateLimitCall[]): boolean {
  for (const call of calls) if (call.refundable === true) return false;
  return true;
}

function takesLeases(calls: readonly RateLimitCall[]): boolean {
  for (const call of calls) if (call.algorithm.name === 'concurrency') return true;
  return false;
}

function keyOf(calls: readonly RateLimitCall[]): string {
  return calls.length === 1 ? calls[0].stateKey : calls.map((c) => c.stateKey).join('|');
}
