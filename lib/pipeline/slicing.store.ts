import { decideSeen, StoreLayer, type AnswerWatcher } from './store-layer';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision, StoreVerdict } from '../stores/store.interface';
import { HeldSlices, type Slice } from './held-slices';
import { Verdict } from '../stores/verdicts';

/** How long a slice is spent after the store granted it, ms; what is left then is given back. */
export const SLICE_LIFETIME_MS = 1_000;

/**
 * What a decision does with one of its calls: send it to the store as it is, send it taking a whole slice
 * (`max(slice, cost)` units, the rest kept here), or spend it from a slice (the one its units were reserved in).
 */
type Plan = 'store' | 'refill' | Slice;

/**
 * Quota slices for a hot key (policy `slice`): a key that every request of every instance shares (one global
 * limit) lives on one Redis core, whatever the Cluster. Here an instance takes `slice` units at a time from the
 * store, in one ordinary atomic decision, and spends them in-process; what is left after
 * {@link SLICE_LIFETIME_MS} (or, for `fixed-window`, when the window of the grant ends) is given back. Every unit
 * admitted was charged in the store first, so a fixed window admits at most its limit; for the other algorithms
 * units are spent up to a second after they were taken, so any span admits at most the slices outstanding
 * (instances × `slice`) above the limit.
 *
 * Near the limit, when the store cannot grant a whole slice, the decision is made again exactly (its own cost)
 * and the key stays exact until an answer shows room for a slice again: retry times stay the store's own. A
 * slice is only ever taken from the store itself, never from a fallback's answer.
 */
export class SlicingStore extends StoreLayer {
  /** The slices held here, per key, and their give-backs. */
  private readonly slices: HeldSlices;

  /** @param clock local time in ms; only its differences are read (monotonic by default). */
  constructor(
    inner: RateLimitStore,
    private readonly clock: () => number = () => performance.now(),
  ) {
    super(inner);
    this.slices = new HeldSlices(inner, clock);
  }

  /** Spent from slices with no promise when every call can be; else whatever the inner store answers at once. */
  override decideSync(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision | undefined {
    if (mode === 'consume' && anySliced(calls)) {
      const plans = this.plan(calls);
      if (plans?.every(isSlice)) return this.spentLocally(plans);
      if (plans) this.unreserve(calls, plans);
    }
    return this.inner.decideSync?.(calls, mode);
  }

  override decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    // Not an async function for calls without slices: every decision passes here, and one adds a promise.
    return mode === 'consume' && anySliced(calls) ? this.decideSliced(calls) : this.inner.decide(calls, mode);
  }

  /** Calls without slices reach the inner store as they are: so does the watcher. */
  override decideSeen(calls: readonly RateLimitCall[], mode: DecisionMode, watcher: AnswerWatcher): Promise<StoreDecision> {
    return mode === 'consume' && anySliced(calls) ? super.decideSeen(calls, mode, watcher) : decideSeen(this.inner, calls, mode, watcher);
  }

  private async decideSliced(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    let plans = this.plan(calls);
    while (plans === undefined) {
      await this.refillOf(calls);
      plans = this.plan(calls);
    }
    if (plans.every(isSlice)) return this.spentLocally(plans);
    const askedAt = this.clock();
    const sent: RateLimitCall[] = [];
    /** Per call, where it is in `sent` (−1: spent locally), and the units a refill takes (0: not a refill). */
    const at: number[] = [];
    const takes = calls.map((call, index) => {
      at.push(isSlice(plans[index]) ? -1 : sent.length);
      if (isSlice(plans[index])) return 0;
      const take = plans[index] === 'refill' ? Math.max(call.slice ?? 0, call.cost) : 0;
      sent.push(take > 0 ? { ...call, cost: take } : call);
      return take;
    });
    const answer = this.inner.decide(sent, 'consume');
    const refilled = calls.filter((_, i) => takes[i] > 0).map((call) => this.slices.entry(call.stateKey));
    for (const entry of refilled) entry.refilling = answer;
    try {
      const decision = await answer;
      const refillVerdicts = takes.flatMap((take, i) => (take > 0 ? [decision.verdicts[at[i]]] : []));
      if (refillVerdicts.some((v) => v.reason === Verdict.StoreUnavailable)) {
        // The store was unavailable and a fallback decided a whole slice, which no request asked for (`insurance`
        // would charge it to its share, or reject what the request's own cost fits): give back what it charged
        // and let the fallback decide the request at its own cost.
        this.unreserve(calls, plans);
        if (decision.allowed) await this.inner.refund(sent);
        return await this.inner.decide(calls, 'consume');
      }
      if (decision.allowed) return this.merged(calls, plans, takes, decision, askedAt);
      this.unreserve(calls, plans);
      // A rejection of a whole slice says nothing about the request's own cost: decide it again exactly, and keep
      // a key whose slice did not fit exact.
      if (!takes.some((take, i) => take > calls[i].cost)) return this.merged(calls, plans, takes, decision, askedAt);
      calls.forEach((call, i) => {
        if (takes[i] > 0 && !decision.verdicts[at[i]].allowed) this.slices.entry(call.stateKey).exact = true;
      });
      return this.exactly(calls);
    } finally {
      for (const entry of refilled) if (entry.refilling === answer) entry.refilling = undefined;
    }
  }

  /** A lockout this instance sets is seen at once: its slices of the keys are given back, so the next decision asks Redis. */
  override block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    for (const call of calls) {
      const entry = this.slices.get(call.stateKey);
      if (entry) this.slices.giveBack(entry);
    }
    return this.inner.block(calls, ms);
  }

  /** `reset`: a slice taken before it must not be spent after it (its units were charged before the reset). */
  override delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.slices.delete(key);
    return this.inner.delete(keys);
  }

  override async close(): Promise<void> {
    await this.slices.close();
    await this.inner.close();
  }

  /**
   * What to do with each call, with the units of `Local` ones reserved; `undefined` when a call waits for a
   * grant in flight on its key (nothing reserved then).
   */
  private plan(calls: readonly RateLimitCall[]): Plan[] | undefined {
    const now = this.clock();
    const plans: Plan[] = [];
    for (const call of calls) {
      if (!isSliced(call)) {
        plans.push('store');
        continue;
      }
      const entry = this.slices.entry(call.stateKey);
      if (entry.slice && (now >= entry.slice.expiresAt || !sameParams(entry.slice.call, call))) this.slices.giveBack(entry);
      if (entry.slice && entry.slice.units >= call.cost) {
        entry.slice.units -= call.cost;
        plans.push(entry.slice);
      } else if (entry.exact) plans.push('store');
      else if (entry.refilling) {
        this.unreserve(calls, plans);
        return undefined;
      } else plans.push('refill');
    }
    return plans;
  }

  /** A grant in flight on one of the keys of `calls`. */
  private refillOf(calls: readonly RateLimitCall[]): Promise<unknown> {
    for (const call of calls) {
      const refilling = isSliced(call) ? this.slices.get(call.stateKey)?.refilling : undefined;
      if (refilling) return refilling.catch(() => undefined);
    }
    return Promise.resolve();
  }

  /** Puts reserved units back in their slice, or back in the store when the slice was given back meanwhile. */
  private unreserve(calls: readonly RateLimitCall[], plans: readonly Plan[]): void {
    plans.forEach((plan, i) => {
      if (!isSlice(plan)) return;
      if (!plan.retired) plan.units += calls[i].cost;
      else this.slices.refundTo(plan, calls[i].cost);
    });
  }

  /** A decision every call of which was spent from its slice (units already reserved by {@link plan}). */
  private spentLocally(slices: readonly Slice[]): StoreDecision {
    const now = this.clock();
    let nowMs = 0;
    const verdicts = slices.map((slice) => {
      nowMs = Math.max(nowMs, Math.floor(slice.grantedAtStore + now - slice.askedAt));
      return fromSlice(slice, now);
    });
    return { nowMs, allowed: true, verdicts };
  }

  /**
   * The store's decision on what was sent, with the calls spent locally put back in their places and the slices
   * granted kept (a rejected decision charged nothing, so it grants none).
   */
  private merged(
    calls: readonly RateLimitCall[],
    plans: readonly Plan[],
    takes: readonly number[],
    decision: StoreDecision,
    askedAt: number,
  ): StoreDecision {
    const now = this.clock();
    let next = 0;
    const verdicts = calls.map((call, index): StoreVerdict => {
      const plan = plans[index];
      if (isSlice(plan)) return fromSlice(plan, now);
      const verdict = decision.verdicts[next++];
      if (verdict.reason !== Verdict.Allowed || !isSliced(call)) return verdict;
      if (takes[index] === 0 || !decision.allowed) {
        this.learn(call, verdict);
        return verdict;
      }
      const slice = this.granted(call, takes[index] - call.cost, decision.nowMs, askedAt, verdict);
      return { ...verdict, remaining: verdict.remaining + slice.units };
    });
    return { nowMs: decision.nowMs, allowed: decision.allowed, verdicts };
  }

  /** The decision on `calls` as they are (their own costs), with what its answers tell about room for slices. */
  private async exactly(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    const decision = await this.inner.decide(calls, 'consume');
    calls.forEach((call, i) => {
      if (isSliced(call) && decision.verdicts[i].reason === Verdict.Allowed) this.learn(call, decision.verdicts[i]);
    });
    return decision;
  }

  /** A key decided exactly goes back to slices once the store says a whole one fits again. */
  private learn(call: RateLimitCall, verdict: StoreVerdict): void {
    const entry = this.slices.get(call.stateKey);
    if (entry?.exact && verdict.allowed && verdict.remaining >= (call.slice ?? 0)) entry.exact = false;
  }

  private granted(call: RateLimitCall, units: number, grantedAtStore: number, askedAt: number, verdict: StoreVerdict): Slice {
    const entry = this.slices.entry(call.stateKey);
    this.slices.giveBack(entry);
    // A fixed window's units count in the window of the grant only: spent before it ends (on this host's clock,
    // counted from before the store decided), never in the next one.
    const life = call.algorithm.name === 'fixed-window' ? Math.min(SLICE_LIFETIME_MS, verdict.resetMs) : SLICE_LIFETIME_MS;
    const slice: Slice = { call, units, grantedAtStore, askedAt, expiresAt: askedAt + life, verdict, retired: false };
    entry.slice = slice;
    entry.exact = false;
    return slice;
  }
}

function isSlice(plan: Plan): plan is Slice {
  return typeof plan === 'object';
}

/** A plain loop, not `some` with a callback: every decision of the Redis store passes here. */
function anySliced(calls: readonly RateLimitCall[]): boolean {
  for (const call of calls) if (isSliced(call)) return true;
  return false;
}

function isSliced(call: RateLimitCall): boolean {
  return (call.slice ?? 0) > 0;
}

function sameParams(a: RateLimitCall, b: RateLimitCall): boolean {
  const p = a.params;
  const q = b.params;
  return p.limit === q.limit && p.windowMs === q.windowMs && p.burst === q.burst && a.slice === b.slice;
}

/** An admission spent from `slice`: what the store had left at the grant plus the slice, its times counted down. */
function fromSlice(slice: Slice, now: number): StoreVerdict {
  const elapsed = now - slice.askedAt;
  const { verdict } = slice;
  return {
    allowed: true,
    remaining: verdict.remaining + slice.units,
    resetMs: Math.max(0, Math.ceil(verdict.resetMs - elapsed)),
    retryAfterMs: 0,
    delayMs: 0,
    moreQuotaMs: Math.max(0, Math.ceil(verdict.moreQuotaMs - elapsed)),
    reason: Verdict.Allowed,
  };
}
