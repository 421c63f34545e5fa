import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitEngine } from '../pipeline/rate-limit.engine';
import { charged, decidedAt } from '../pipeline/charges';
import type { RateLimitCall } from '../stores/store.interface';

/**
 * Reserve, then settle: a request is charged an estimate up front, atomically (all of it or nothing), and once
 * its actual cost is known one atomic store call per tracker adjusts each policy by `estimate − actual`, as a
 * refund: a positive difference is given back, a negative one (an overdraft) is charged whatever the counter
 * says, as a penalty is. A holder that dies in between leaves exactly the estimate charged, never a part of it.
 */

/** One policy's charge that a settlement adjusts. */
export interface Charge {
  /** The store call that charged it: the settlement reuses it (see {@link settleCharges}). */
  call: RateLimitCall;
  /** Units charged up front. */
  estimate: number;
  /** The store's time of the charge, ms: a give-back reaches only the window the units were counted in. */
  chargedAtMs: number;
}

/** What one decision charged, per policy, as an engine result (or a route outcome) gives it. */
export interface ChargedDecision {
  decisions: readonly RateLimitDecision[];
  calls: readonly RateLimitCall[];
  nowMs: number | number[];
}

/**
 * The charge of policy `i` of `result`, or `undefined` when the store took nothing for it: a rejection (a
 * shadow policy's too), or a fallback's answer during an outage, which charged nothing there.
 */
export function chargeOf(result: ChargedDecision, i: number): Charge | undefined {
  const call = result.calls[i];
  if (!charged(result.decisions[i], call)) return undefined;
  return { call, estimate: call.cost, chargedAtMs: decidedAt(result, i) };
}

/**
 * The largest overdraft one settlement charges a policy: its capacity (`burst` for the bucket algorithms,
 * `limit` otherwise). It keeps the debt one request can leave bounded, and a `sliding-log`'s memory with it
 * (one entry per unit).
 */
export function maxOverdraft(call: RateLimitCall): number {
  return call.algorithm.usesBurst ? call.params.burst : call.params.limit;
}

/**
 * Settles `charges` (all of one tracker) against their actual costs, `actual[i]` for `charges[i]`, in one
 * atomic store call; nothing is sent when every estimate was exact. Each charge's call is rewritten in place
 * into its adjustment, its cost the difference (an overdraft clamped to {@link maxOverdraft}) and its token the
 * time of the charge: in place because the store recognises by identity a call its fallback answered during
 * an outage, whose units were taken from the in-process insurance store and must be settled there.
 */
export async function settleCharges(engine: RateLimitEngine, charges: readonly Charge[], actual: readonly number[]): Promise<void> {
  const calls: RateLimitCall[] = [];
  charges.forEach(({ call, estimate, chargedAtMs }, i) => {
    const difference = Math.max(estimate - actual[i], -maxOverdraft(call));
    if (difference === 0) return;
    call.cost = difference;
    call.token = String(chargedAtMs);
    calls.push(call);
  });
  if (calls.length > 0) await engine.refund(calls);
}

/** Whether `actual` is a cost a settlement can take: a whole number of units ≥ 0. */
export function isCost(actual: unknown): actual is number {
  return typeof actual === 'number' && Number.isSafeInteger(actual) && actual >= 0;
}
