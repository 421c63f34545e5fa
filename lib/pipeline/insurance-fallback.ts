import { heldUnits } from '../policy/compile-reserve';
import { MemoryStore } from '../stores/memory/memory.store';
import type { DecisionMode, RateLimitCall, StoreDecision, StoreVerdict } from '../stores/store.interface';
import { Verdict } from '../stores/verdicts';

/**
 * What answers a decision in the store's place while it is away: each call's fallback, `fail-open`,
 * `fail-closed`, or the in-process insurance store with a share of the limit. Remembers which calls it
 * answered, so that their refunds never reach the inner store (see {@link ResilientStore.refund}).
 */
export class InsuranceFallback {
  private readonly insurance: MemoryStore;
  /** Calls a fallback answered: they took nothing from the inner store, so their refunds never go there. */
  private readonly answeredLocally = new WeakSet<RateLimitCall>();
  /** Instances the store counted as live at its last answered read of the overrides (this one included). */
  private liveInstances = 1;

  /**
   * @param insuranceShare `ResilientStoreOptions.insuranceShare`
   * @param wallClock wall-clock time of the insurance store's windows, ms
   */
  constructor(
    private readonly insuranceShare: number | undefined,
    private readonly wallClock: () => number,
  ) {
    this.insurance = new MemoryStore({ clock: wallClock });
  }

  /** Keeps the count of live instances a read of the overrides brought back (ignored below 1). */
  countLive(liveInstances: number | undefined): void {
    if (liveInstances !== undefined && liveInstances >= 1) this.liveInstances = liveInstances;
  }

  /** Whether a fallback answered `call` (so the inner store took nothing for it). */
  answered(call: RateLimitCall): boolean {
    return this.answeredLocally.has(call);
  }

  /** Gives back to the insurance store what `insurance` calls took there. */
  refund(insured: readonly RateLimitCall[]): Promise<void> {
    return this.insurance.refund(insured.map((c) => this.insuredCall(c)));
  }

  /** Forgets the keys' insurance counts. */
  delete(keys: readonly string[]): Promise<void> {
    return this.insurance.delete(keys);
  }

  /** What `insurance` grants here while the store is away, and why that share. */
  note(store: string): string {
    const { insuranceShare } = this;
    const grants = "with 'insurance', the default, this instance grants";
    if (insuranceShare !== undefined) return `${grants} ${+(insuranceShare * 100).toFixed(2)}% of each limit (insuranceShare)`;
    const live = this.liveInstances;
    if (live === 1) return `${grants} all of each limit: no other instance polled ${store} in the last minute`;
    return `${grants} 1/${live} of each limit: ${live} instances polled ${store} in the last minute`;
  }

  /** The decision each call's fallback gives in the store's place. */
  answer(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision {
    for (const call of calls) this.answeredLocally.add(call);
    const insured = calls.filter((c) => c.fallback === 'insurance').map((c) => this.insuredCall(c));
    // A fail-closed call rejects the request, so the insurance store must not charge the others.
    const localMode = calls.some((c) => c.fallback === 'fail-closed') ? 'peek' : mode;
    const local = insured.length > 0 ? this.insurance.decideSync(insured, localMode) : undefined;
    let next = 0;
    const verdicts = calls.map((call): StoreVerdict => {
      if (call.fallback === 'insurance') return { ...local!.verdicts[next++], reason: Verdict.StoreUnavailable };
      const allowed = call.fallback === 'fail-open';
      const retryAfterMs = allowed ? 0 : 1_000;
      return {
        allowed,
        remaining: allowed ? call.params.limit : 0,
        resetMs: 0,
        retryAfterMs,
        delayMs: 0,
        moreQuotaMs: retryAfterMs,
        reason: Verdict.StoreUnavailable,
      };
    });
    return { nowMs: this.wallClock(), allowed: verdicts.every((v) => v.allowed), verdicts };
  }

  /**
   * The same call against a share of the limit (at least 1): `insuranceShare`, or 1 / the live instances; a
   * reserve's hold shrinks with the capacity it is a share of.
   */
  private insuredCall(call: RateLimitCall): RateLimitCall {
    const { insuranceShare } = this;
    const live = this.liveInstances;
    const share = (n: number) => Math.max(1, Math.floor(insuranceShare === undefined ? n / live : n * insuranceShare));
    const params = { ...call.params, limit: share(call.params.limit), burst: share(call.params.burst) };
    const insured = { ...call, params };
    if (call.hold) insured.hold = heldShare(call, params);
    return insured;
  }
}

/** `call`'s hold scaled to the capacity of `params`, as the same share of it. */
function heldShare(call: RateLimitCall, params: RateLimitCall['params']): number {
  const field = call.algorithm.usesBurst ? 'burst' : 'limit';
  return heldUnits((call.hold ?? 0) / call.params[field], params[field]);
}
