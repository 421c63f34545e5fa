import type { AlgorithmParams, AlgorithmVerdict } from '../../algorithms/algorithm.interface';
import { deniedDecision, extendedLockout, lockoutNote, lockoutUntil, newLockout, type LockoutValue } from '../lockouts';
import type { DecisionMode, RateLimitCall, StoreDecision, StoreVerdict } from '../store.interface';
import { Verdict } from '../verdicts';
import type { MemoryKeyspace } from './memory-keyspace';

/** What one policy's decision reads of its call: a {@link RateLimitCall}, or the plain path's own. */
export type PolicyCall = Pick<
  RateLimitCall,
  'algorithm' | 'params' | 'cost' | 'hold' | 'blockForMs' | 'escalate' | 'stateKey' | 'stateSlot' | 'blockKey' | 'token'
>;

/**
 * The memory store's deny, lockout, capacity, reserve and `blockFor` rules, written once for every path that
 * decides (`MemoryStore.decideSync` and its plain path `consumePlain`): the TypeScript twin of
 * `algorithms/decide-one.lua`, step for step, so the store decides as Redis would.
 */
export class MemoryRules {
  /** Set by the first deny written: until then no decision reads a deny key (the usual store has none). */
  hasDenials = false;
  /** Set by the first lockout written (`blockFor`, `block()`): until then no decision reads a lockout key. */
  hasLockouts = false;

  constructor(private readonly keyspace: MemoryKeyspace) {}

  /**
   * As decide.lua: every policy rejected when the decision's tracker is denied. Read with `touch`, so a denied
   * tracker that keeps calling is the last its `maxKeys` bound evicts.
   */
  denied(calls: readonly RateLimitCall[], now: number): StoreDecision | undefined {
    if (!this.hasDenials) return undefined;
    const denyKey = calls[0]?.denyKey;
    if (denyKey === undefined) return undefined;
    const denial = this.keyspace.read(denyKey, now, true) as LockoutValue | undefined;
    if (denial === undefined || lockoutUntil(denial) <= now) return undefined;
    return deniedDecision(calls.length, lockoutUntil(denial) - now, now, lockoutNote(denial));
  }

  /**
   * One policy's verdict, written into `out`, as decide-one.lua decides it: a lockout in force rejects
   * (`Blocked`); otherwise the counter is checked with the units a reserve holds back and charged without them
   * (`Reserved` when only the hold refuses); a cost beyond the capacity can never fit (`CostExceedsCapacity`,
   * retry −1); and a consume the counter rejects starts the policy's `blockFor` lockout (`Blocked`). Returns
   * the algorithm verdict to commit when the policy allows, else `undefined`. The rarer rules sit in methods
   * of their own, so that this one stays small enough for V8 to inline into the plain path.
   */
  decide(call: PolicyCall, mode: DecisionMode, now: number, out: StoreVerdict): AlgorithmVerdict<unknown> | undefined {
    if (this.hasLockouts && this.lockedOut(call, now, out)) return undefined;
    const params = paramsAt(call.params, now);
    const hold = call.hold ?? 0;
    const v = hold > 0 ? this.heldBack(call, params, hold, now, out) : this.counted(call, params, call.cost, now, out);
    if (call.cost + hold > (call.algorithm.usesBurst ? params.burst : params.limit)) {
      out.allowed = false;
      out.retryAfterMs = -1;
      out.reason = Verdict.CostExceedsCapacity;
      return undefined;
    }
    if (v.allowed) return v;
    if (out.reason === Verdict.Limited && call.blockForMs > 0 && mode === 'consume') this.lockOut(call, now, out);
    return undefined;
  }

  /**
   * `block()` (decide.lua's `extendLockout`): a lockout of `ms` from now unless one in force ends later; a
   * call whose lockout key is its deny key writes a deny.
   */
  block(call: RateLimitCall, ms: number, now: number): void {
    this.hasLockouts = true;
    if (call.blockKey === call.denyKey) this.hasDenials = true;
    const previous = this.keyspace.read(call.blockKey, now) as LockoutValue | undefined;
    const next = extendedLockout(previous, now, ms, call.escalate, call.token);
    if (next) this.keyspace.write(call.blockKey, next.value, next.ttlMs, now);
  }

  /** Whether a lockout in force rejects the call: then `out` says for how long. */
  private lockedOut(call: PolicyCall, now: number, out: StoreVerdict): boolean {
    const lockout = this.keyspace.read(call.blockKey, now) as LockoutValue | undefined;
    if (lockout === undefined || lockoutUntil(lockout) <= now) return false;
    const left = lockoutUntil(lockout) - now;
    out.allowed = false;
    out.remaining = 0;
    out.resetMs = left;
    out.retryAfterMs = left;
    out.delayMs = 0;
    out.moreQuotaMs = left;
    out.reason = Verdict.Blocked;
    return true;
  }

  /** The lockout a rejected consume starts (`blockFor`, escalated for a repeat offender), its length added to `out`. */
  private lockOut(call: PolicyCall, now: number, out: StoreVerdict): void {
    const previous = this.keyspace.read(call.blockKey, now) as LockoutValue | undefined;
    const { lengthMs, value, ttlMs } = newLockout(call.blockForMs, call.escalate, previous, now);
    this.hasLockouts = true;
    this.keyspace.write(call.blockKey, value, ttlMs, now);
    out.retryAfterMs = Math.max(out.retryAfterMs, lengthMs);
    out.resetMs = Math.max(out.resetMs, lengthMs);
    out.moreQuotaMs = Math.max(out.moreQuotaMs, lengthMs);
    out.reason = Verdict.Blocked;
  }

  /**
   * A reserve: the counter checked with `hold` units more than the cost, and charged the cost alone. `out` as
   * that check leaves it, less the units held back; `Reserved` when the cost alone would fit.
   */
  private heldBack(call: PolicyCall, params: AlgorithmParams, hold: number, now: number, out: StoreVerdict): AlgorithmVerdict<unknown> {
    const { cost } = call;
    let v = this.counted(call, params, cost + hold, now, out);
    if (cost + hold <= (call.algorithm.usesBurst ? params.burst : params.limit)) {
      if (v.allowed) v = this.counted(call, params, cost, now, out);
      else if (this.verdict(call, params, cost, now).allowed) out.reason = Verdict.Reserved;
    }
    out.remaining = Math.max(out.remaining - hold, 0);
    return v;
  }

  /** The counter's verdict on `cost` units, also written into `out` (`Allowed` or `Limited`). */
  private counted(call: PolicyCall, params: AlgorithmParams, cost: number, now: number, out: StoreVerdict): AlgorithmVerdict<unknown> {
    const v = this.verdict(call, params, cost, now);
    out.allowed = v.allowed;
    out.remaining = v.remaining;
    out.resetMs = v.resetMs;
    out.retryAfterMs = v.retryAfterMs;
    out.delayMs = v.delayMs;
    out.moreQuotaMs = v.moreQuotaMs;
    out.reason = v.allowed ? Verdict.Allowed : Verdict.Limited;
    return v;
  }

  /** The algorithm's verdict on the call's state, whose rewrite for changed params (if any) is stored whatever the outcome. */
  private verdict(call: PolicyCall, params: AlgorithmParams, cost: number, now: number): AlgorithmVerdict<unknown> {
    const { stateKey, stateSlot } = call;
    const v = call.algorithm.check(this.keyspace.readState(stateKey, stateSlot, now), params, cost, now, call.token);
    if (v.rewrite) this.keyspace.writeState(stateKey, stateSlot, v.rewrite.next, v.rewrite.ttlMs, now);
    return v;
  }
}

/** A verdict with every field, to fill with {@link MemoryRules.decide}. */
export function emptyVerdict(): StoreVerdict {
  return { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, moreQuotaMs: 0, reason: Verdict.Allowed };
}

/**
 * `params` for a decision at `now`. A calendar window's periods computed on another clock than this store's
 * (a `RateLimiterService` call under a test clock) are recomputed around this store's now: its clock is the
 * only one its decisions read, so, unlike Redis, it is never a period away from them.
 */
export function paramsAt(params: AlgorithmParams, now: number): AlgorithmParams {
  const { periods } = params;
  return periods === undefined || periods.holds(now) ? params : periods.around(now).params(params.limit, params.burst);
}
