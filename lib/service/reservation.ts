import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { EngineDecision, PolicyRequest, RateLimitEngine } from '../pipeline/rate-limit.engine';
import { MAX_POLICIES_PER_DECISION } from '../stores/store.interface';
import { describeValue } from '../shared/describe-value';
import { chargeOf, isCost, settleCharges, type Charge } from './settlement';

/**
 * A reservation: an estimated cost taken up front (`RateLimiterService.reserve`), settled once the actual cost
 * is known. The estimate is charged atomically, all of it or nothing, and the settlement is one atomic
 * adjustment, so a holder that dies before settling leaves exactly the estimate charged, never a part of it.
 * @example
 * const r = await limiter.reserve([perMinute, perDay], `key:${apiKey}`, { cost: maxTokens });
 * if (!r.allowed) throw new HttpException('Token budget exhausted', 429);
 * try { const out = await model.complete(prompt, maxTokens); await r.settle(out.usage.totalTokens); return out; }
 * catch (error) { await r.cancel(); throw error; }
 */
export interface RateLimitReservation {
  /** True when every policy allowed and the estimate was charged to all of them; false when none was charged. */
  readonly allowed: boolean;
  /** The first policy's decision: the only one when a single policy was reserved. */
  readonly decision: RateLimitDecision;
  /** One decision per policy, in order. */
  readonly decisions: readonly RateLimitDecision[];
  /**
   * Settles the reservation at `actual` units (a whole number ≥ 0) per policy: the estimate minus `actual` is
   * given back, or charged when `actual` is more (an overdraft: at most the policy's capacity more, which may
   * leave the quota below zero so the next requests wait it out), in one atomic store call. A give-back never
   * makes quota in a window the estimate was not counted in (see docs/programmatic-use.md › Reserve, then settle, for the rules per algorithm).
   * A reservation settles once: a second `settle` or `cancel` rejects with a RateLimitConfigError, and so
   * does an `actual` that is not a whole number ≥ 0 (the reservation then stays open). On a rejected
   * reservation it does nothing.
   */
  settle(actual: number): Promise<void>;
  /** `settle(0)`: gives the whole estimate back (the work did not happen). */
  cancel(): Promise<void>;
}

/**
 * Checks the requests of a reservation: at most {@link MAX_POLICIES_PER_DECISION}, distinct names, no
 * `concurrency` policy (a lease has no cost to settle: `lease()` takes and gives back whole slots).
 */
export function assertReservable(requests: readonly PolicyRequest[]): void {
  if (requests.length === 0 || requests.length > MAX_POLICIES_PER_DECISION) {
    throw new RateLimitConfigError(`reserve: ${requests.length} policies; give 1 to ${MAX_POLICIES_PER_DECISION}, decided together.`);
  }
  const names = new Set<string>();
  for (const { compiled } of requests) {
    if (compiled.algorithm.name === 'concurrency') {
      throw new RateLimitConfigError(
        `reserve: policy '${compiled.name}' uses 'concurrency', which has no reservations: a lease holds a slot, not a cost; use lease().`,
      );
    }
    if (names.has(compiled.name)) {
      throw new RateLimitConfigError(`reserve: two policies are named '${compiled.name}'; give each policy of one call its own name.`);
    }
    names.add(compiled.name);
  }
}

/**
 * The reservation of a decision the engine made. `assertOpen` throws once the application has closed the store
 * (a settlement then rejects, as every service call does).
 */
export function reservationOf(engine: RateLimitEngine, result: EngineDecision, assertOpen: () => void): RateLimitReservation {
  const charges: Charge[] = [];
  if (result.allowed) {
    for (let i = 0; i < result.calls.length; i++) {
      const charge = chargeOf(result, i);
      if (charge) charges.push(charge);
    }
  }
  let settled = false;
  const settle = async (actual: number): Promise<void> => {
    if (!result.allowed) return;
    if (settled) throw new RateLimitConfigError('reserve: this reservation is already settled (or cancelled); a reservation settles once.');
    if (!isCost(actual))
      throw new RateLimitConfigError(`reserve: settle(${describeValue(actual)}): the actual cost must be a whole number of units ≥ 0.`);
    assertOpen();
    settled = true;
    await settleCharges(
      engine,
      charges,
      charges.map(() => actual),
    );
  };
  return {
    allowed: result.allowed,
    decision: result.decisions[0],
    decisions: result.decisions,
    settle,
    cancel: () => settle(0),
  };
}
