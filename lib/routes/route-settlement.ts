import type { ExecutionContext } from '@nestjs/common';
import { IntervalWarning } from '../shared/interval-warning';
import type { RateLimitContextAdapter } from '../contexts/rate-limit-context';
import { HandlerSettlement } from '../http/handler-settlement';
import { HttpExchange } from '../http/http-exchange';
import type { RateLimitSettle } from '../interfaces/policy.interface';
import type { RateLimitEngine } from '../pipeline/rate-limit.engine';
import { chargeOf, isCost, settleCharges, type Charge } from '../service/settlement';
import { describeValue } from '../shared/describe-value';
import type { RouteOutcome } from './decide-route';
import type { PlannedPolicy, RoutePlan } from './route-plan';
import type { UserFunctionDeadlines } from './user-function-deadlines';

/** What a settle function that failed leads to, for its deadline's error and the log. */
const ESTIMATE_KEPT = 'the estimate stays charged';

/** One policy's charge and its actual cost, once its settle function has answered (`undefined`: it failed). */
interface Settling {
  charge: Charge;
  actual: number | undefined | Promise<number | undefined>;
}

/**
 * Settles a route's `settle` policies once its call is over (the response ended and the handler settled):
 * each policy's function gives the actual cost from what the handler returned, and what the guard charged
 * is adjusted by the difference in one atomic store call per tracker (see RateLimitEngine.refund). Only charges the store took are
 * settled: not a shadow policy that would have rejected, nor a fallback's answer during an outage. A function
 * that throws, answers anything but a whole number ≥ 0, or misses `userFunctionTimeoutMs` leaves its
 * policy's estimate charged; these failures, and the store's, are logged at most once per 10 s and never
 * reach the request (which is over).
 */
export class RouteSettlements {
  private readonly warning = new IntervalWarning('RateLimitGuard');

  constructor(
    private readonly engine: RateLimitEngine,
    private readonly deadlines: UserFunctionDeadlines,
  ) {}

  /** Settles the `settle` policies of `plan` that `outcome` charged; returns when the store has them (never rejects). */
  async settle(context: ExecutionContext, caller: RateLimitContextAdapter, plan: RoutePlan, outcome: RouteOutcome): Promise<void> {
    const result = caller instanceof HttpExchange ? HandlerSettlement.of(caller.request)?.result : undefined;
    const settling: Settling[] = [];
    plan.policies.forEach((policy, i) => {
      const settleFn = policy.compiled.policy.settle;
      const charge = settleFn ? chargeOf(outcome, i) : undefined;
      if (settleFn && charge) settling.push({ charge, actual: this.actualOf(policy, settleFn, context, result) });
    });
    if (settling.length > 0) await this.settleAll(settling);
  }

  /** What `settleFn` answers for the call, checked; `undefined` (logged) when it failed. */
  private actualOf(policy: PlannedPolicy, settleFn: RateLimitSettle, context: ExecutionContext, result: unknown): Settling['actual'] {
    const describe = () => policy.describe('settle');
    try {
      const answer = this.deadlines.bound(settleFn(context, result), describe, ESTIMATE_KEPT);
      if (!(answer instanceof Promise)) return this.checked(answer, describe);
      return answer.then(
        (a) => this.checked(a, describe),
        (e: unknown) => this.failed(e, describe),
      );
    } catch (error) {
      return this.failed(error, describe);
    }
  }

  /** Settles every charge whose actual cost is known, atomically per tracker (the engine's refund splits by tracker). */
  private async settleAll(group: readonly Settling[]): Promise<void> {
    const actuals = await Promise.all(group.map((s) => s.actual));
    const charges = group.filter((_, i) => actuals[i] !== undefined).map((s) => s.charge);
    const known = actuals.filter((a): a is number => a !== undefined);
    try {
      await settleCharges(this.engine, charges, known);
    } catch (error) {
      this.warn(`could not settle a reservation with the store (${ESTIMATE_KEPT}): ${(error as Error)?.message ?? String(error)}`);
    }
  }

  /** `actual` when it is a cost; otherwise logs it and answers `undefined` (the estimate stays). */
  private checked(actual: unknown, describe: () => string): number | undefined {
    if (isCost(actual)) return actual;
    this.warn(`${describe()}: returned ${describeValue(actual)}, not a whole number of units ≥ 0; ${ESTIMATE_KEPT}.`);
    return undefined;
  }

  private failed(error: unknown, describe: () => string): undefined {
    const message = (error as Error)?.message ?? String(error);
    this.warn(message.startsWith(describe()) ? message : `${describe()}: threw ${message}; ${ESTIMATE_KEPT}.`);
    return undefined;
  }

  private warn(line: string): void {
    this.warning.warn(line);
  }
}
