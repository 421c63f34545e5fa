import { Logger, type ExecutionContext } from '@nestjs/common';
import { problemOverloaded, problemRejection, problemUnavailable } from '../contexts/problem-details';
import type { RateLimitContextAdapter, RateLimitOverload, RateLimitRejection } from '../contexts/rate-limit-context';
import type { RateLimitHeaderProfile } from '../http/header-profiles';
import { HttpExchange } from '../http/http-exchange';
import { isViolated, retryAfterSeconds, writeRateLimitHeaders } from '../http/rate-limit-headers';
import type { RateLimitHolds } from '../http/request-holds';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { charged } from '../pipeline/charges';
import { failedClosed } from '../pipeline/public-decision';
import type { RateLimitEngine } from '../pipeline/rate-limit.engine';
import { IntervalWarning } from '../shared/interval-warning';
import type { RateLimitCall } from '../stores/store.interface';
import { trackerOf, type RouteOutcome } from './decide-route';
import type { AdaptiveAdmission, HeaderParts } from './route-adaptive';
import { LeaseHeartbeats } from './lease-heartbeats';
import type { RoutePlan } from './route-plan';
import { RouteSettlements } from './route-settlement';
import type { UserFunctionDeadlines } from './user-function-deadlines';

/** The message of a call refused by a policy's `reserve`: what is left is kept for more critical calls. */
const RESERVED_MESSAGE = 'Service Unavailable: the capacity left is reserved for more critical requests; retry later.';

/** What a {@link RouteResponder} answers with and through. */
export interface RouteResponderDeps {
  engine: RateLimitEngine;
  holds: RateLimitHolds;
  options: RateLimitModuleOptions;
  /** How the `RateLimit` field reads (module option `headerProfile`). */
  profile: RateLimitHeaderProfile;
  /** Bounds `settle` functions, as the guard bounds the policies' other functions. */
  deadlines: UserFunctionDeadlines;
}

/**
 * Answers a decided call for the guard: writes its headers, rejects it with the error its context expects (HTTP
 * 429 or 503, as problem details with `errorFormat: 'problem+json'`, a GraphQL error, a `WsException`, an
 * `RpcException`), or lets it through after its shaping delay, having arranged what happens when it ends
 * (refunds for `countOnly`, `concurrency` leases released and renewed meanwhile, `settle`).
 */
export class RouteResponder {
  /** Logs in the guard's name: to a reader of the log, this is what the guard does. */
  private readonly logger = new Logger('RateLimitGuard');
  private readonly storeFailure = new IntervalWarning('RateLimitGuard');
  private readonly engine: RateLimitEngine;
  private readonly holds: RateLimitHolds;
  private readonly options: RateLimitModuleOptions;
  private readonly profile: RateLimitHeaderProfile;
  private readonly settlements: RouteSettlements;
  /** Renews the `concurrency` leases of HTTP calls whose work is still running. */
  private readonly heartbeats: LeaseHeartbeats;
  /** Per plan, the policies its headers show when some are hidden (null: all are); see shownPolicies. */
  private readonly shown = new WeakMap<RoutePlan, number[] | null>();

  constructor({ engine, holds, options, profile, deadlines }: RouteResponderDeps) {
    this.engine = engine;
    this.holds = holds;
    this.options = options;
    this.profile = profile;
    this.settlements = new RouteSettlements(engine, deadlines);
    this.heartbeats = new LeaseHeartbeats(engine.store);
  }

  /**
   * Answers the call: headers, then a rejected promise, or a pass (after the shaping delay, if any). A pass
   * without a delay is `true` itself, no promise.
   */
  respond(context: ExecutionContext, caller: RateLimitContextAdapter, plan: RoutePlan, outcome: RouteOutcome): boolean | Promise<boolean> {
    if (!outcome.allowed && plan.leaseHold?.ms !== undefined) outcome.decisions = leaseHint(plan, outcome.decisions, plan.leaseHold.ms);
    this.writeHeaders(caller, plan, outcome);
    this.reportShadow(plan, outcome);
    if (!outcome.allowed) {
      outcome.admission?.cancel();
      return rejectSoon(this.rejection(context, caller, outcome));
    }
    if (plan.settles) this.settleOnEnd(context, caller, plan, outcome);
    const delayMs = this.shapingDelay(plan, outcome.decisions);
    return delayMs > 0 ? this.holds.hold(delayMs).then(() => true) : true;
  }

  /** The error of a call an adaptive limit refused, after writing its headers (the store was not asked). */
  refuse(caller: RateLimitContextAdapter, admission: AdaptiveAdmission): Error {
    const mode = this.options.headers ?? 'ietf';
    if (mode !== 'none') writeRateLimitHeaders(caller, { mode, profile: this.profile, ...admission.withHeaders(undefined) });
    return this.overloaded(caller, admission.overload());
  }

  /**
   * The error of a call refused for capacity (an adaptive limit, the load shedder, a policy's reserve): a 503 with `Retry-After` over HTTP (problem details of type `temporary-reduced-capacity` with
   * `errorFormat: 'problem+json'`), and each other context's own refusal, told apart from its 429.
   */
  overloaded(call: RateLimitContextAdapter, overload: RateLimitOverload): Error {
    if (!this.problemDetails(call)) return call.overloaded(overload);
    return problemOverloaded(call, overload.message, overload.retryAfter, overload.decisions);
  }

  /** No lease is renewed any more (the application is shutting down). */
  close(): void {
    this.heartbeats.close();
  }

  /**
   * Headers for the call's enforced policies. Shadow policies measure silently: they are left out unless
   * `shadowHeaders` is on (a trial policy's `r=0` would otherwise make clients slow down for nothing).
   */
  private writeHeaders(caller: RateLimitContextAdapter, plan: RoutePlan, outcome: RouteOutcome): void {
    const mode = this.options.headers ?? 'ietf';
    if (mode === 'none') return;
    const shown = this.shownPolicies(plan);
    if (shown === undefined && outcome.admission === undefined) {
      // The usual route: every policy shown, no adaptive part; one object, written as it is.
      const { policyHeader, decisions, calls: policies } = outcome;
      return writeRateLimitHeaders(caller, { mode, profile: this.profile, policyHeader, decisions, policies });
    }
    const parts = this.shownParts(shown, plan, outcome);
    const all = outcome.admission !== undefined ? outcome.admission.withHeaders(parts) : parts;
    if (all.decisions.length === 0) return;
    writeRateLimitHeaders(caller, { mode, profile: this.profile, ...all });
  }

  /** The header parts of the store's policies that `shown` lists (all when `undefined`). */
  private shownParts(shown: number[] | undefined, plan: RoutePlan, outcome: RouteOutcome): HeaderParts {
    if (shown === undefined) return { policyHeader: outcome.policyHeader, decisions: outcome.decisions, policies: outcome.calls };
    return {
      policyHeader: shown.map((i) => plan.policies[i].member(outcome.calls[i].params)).join(', '),
      decisions: shown.map((i) => outcome.decisions[i]),
      policies: shown.map((i) => outcome.calls[i]),
    };
  }

  /**
   * The indexes of the policies `plan`'s headers show when some are hidden (shadow policies without
   * `shadowHeaders`); `undefined` when every policy is shown, the usual route. Worked out once per plan.
   */
  private shownPolicies(plan: RoutePlan): number[] | undefined {
    let shown = this.shown.get(plan);
    if (shown === undefined) {
      const indexes = plan.policies.flatMap(({ compiled }, i) => (this.engine.isShadow(compiled) ? [] : [i]));
      shown = this.options.shadowHeaders || indexes.length === plan.policies.length ? null : indexes;
      this.shown.set(plan, shown);
    }
    return shown ?? undefined;
  }

  /**
   * The error a rejected call is answered with, shaped for its transport by its context adapter: a 503 when a
   * `fail-closed` policy met a failed store; a 503 with `Retry-After` (`temporary-reduced-capacity`) when only
   * reserves refused it, the share kept for more critical calls; else a 429 (an `insurance` fallback's
   * rejection included).
   */
  private rejection(context: ExecutionContext, call: RateLimitContextAdapter, { decisions, calls }: RouteOutcome): Error {
    if (decisions.some((d, i) => failedClosed(d, calls[i]))) {
      return this.problemDetails(call) ? problemUnavailable(call) : call.unavailable();
    }
    const rejecting = decisions.filter(isViolated);
    const retryAfter = retryAfterSeconds(rejecting);
    if (rejecting.length > 0 && rejecting.every((d) => d.reason === 'reserved')) {
      const refusal = { message: RESERVED_MESSAGE, retryAfter: Math.max(1, retryAfter ?? 1), decisions };
      return this.overloaded(call, refusal);
    }
    const { errorMessage = 'Too Many Requests' } = this.options;
    const message = typeof errorMessage === 'function' ? errorMessage(context, decisions) : errorMessage;
    if (retryAfter !== null) return this.reject(call, { message, retryAfter, decisions });
    const never = rejecting.find((d) => !Number.isFinite(d.retryAfterMs)) as RateLimitDecision;
    const why = `this request costs more than policy '${never.policy}' can ever allow (capacity ${never.limit}), so retrying will not help`;
    return this.reject(call, { message: `${message}: ${why}.`, retryAfter: null, decisions });
  }

  private reject(call: RateLimitContextAdapter, rejection: RateLimitRejection): Error {
    return this.problemDetails(call) ? problemRejection(call, rejection) : call.rejected(rejection);
  }

  /** `errorFormat: 'problem+json'` shapes the body of controller calls only (problem details are HTTP bodies). */
  private problemDetails(call: RateLimitContextAdapter): call is RateLimitContextAdapter & HttpExchange {
    return this.options.errorFormat === 'problem+json' && call instanceof HttpExchange;
  }

  /**
   * After the response, refunds outcomes `countOnly` does not count, releases `concurrency` leases and
   * settles `settle` policies (only where the call has an end signal: HTTP, GraphQL over HTTP); leases and
   * settlements wait for the handler to have settled too; until then the leases of a call whose end is heard
   * (HTTP, GraphQL over HTTP) are renewed every third of their window (see LeaseHeartbeats). Only what the
   * store {@link charged} is given back: a fallback's answer during an outage took nothing from Redis, and
   * giving it back there would erase real counts.
   */
  private settleOnEnd(context: ExecutionContext, call: RateLimitContextAdapter, plan: RoutePlan, outcome: RouteOutcome): void {
    const heldSince = plan.leaseHold ? performance.now() : 0;
    // Only where the call's end is certain to be heard (an HTTP response always closes, a GraphQL operation's
    // too): a WebSocket or RPC call has no end signal, so its leases just expire after their window.
    const stopRenewing = plan.holdsLeases && call.hearsEnd ? this.heartbeats.keepRoute(plan, outcome) : undefined;
    call.onEnd(({ statusCode, aborted }) => {
      stopRenewing?.();
      const failed = aborted || statusCode >= 400;
      const calls: RateLimitCall[] = [];
      let released = false;
      plan.policies.forEach(({ compiled }, i) => {
        const { countOnly } = compiled.policy;
        const lease = compiled.algorithm.name === 'concurrency';
        const giveBack = lease || (countOnly === 'failed' && !failed) || (countOnly === 'succeeded' && failed);
        if (giveBack && charged(outcome.decisions[i], outcome.calls[i])) {
          calls.push(outcome.calls[i]);
          released ||= lease;
        }
      });
      if (released) plan.leaseHold?.record(performance.now() - heldSince);
      outcome.admission?.end({ statusCode, aborted });
      if (calls.length > 0) this.engine.refund(calls).catch((error: unknown) => this.warnStore(error));
      if (plan.awaitsHandler) void this.settlements.settle(context, call, plan, outcome);
    }, plan.awaitsHandler);
  }

  /** How long to hold the request: the longest `leaky-bucket` delay among enforced policies (shaping). */
  private shapingDelay(plan: RoutePlan, decisions: RateLimitDecision[]): number {
    let delayMs = 0;
    for (let i = 0; i < decisions.length; i++) {
      const d = decisions[i];
      if (d.delayMs !== undefined && d.delayMs > delayMs && !this.engine.isShadow(plan.policies[i].compiled)) delayMs = d.delayMs;
    }
    return delayMs;
  }

  private reportShadow(plan: RoutePlan, outcome: RouteOutcome): void {
    for (let i = 0; i < outcome.decisions.length; i++) {
      const d = outcome.decisions[i];
      if (d.reason === 'shadow') {
        this.logger.debug(
          `shadow: policy '${d.policy}' on ${plan.route} would have rejected ${trackerOf(outcome, i)} (retry after ${d.retryAfterMs} ms)`,
        );
      }
    }
  }

  private warnStore(error: unknown): void {
    this.storeFailure.warn(() => `could not give back a refund or lease to the store: ${(error as Error)?.message ?? String(error)}`);
  }
}

/**
 * `decisions` with each rejecting `concurrency` decision's wait cut to `holdMs`, the route's running
 * estimate of how long a lease is held (at least 1 ms, so `Retry-After` is at least 1 s once rounded up),
 * but never past its soonest lease expiry: a slot typically frees long before the lease's TTL (a reserve's
 * refusal included). Lockouts, fallbacks and requests that can never fit keep their own wait.
 */
function leaseHint(plan: RoutePlan, decisions: RateLimitDecision[], holdMs: number): RateLimitDecision[] {
  return decisions.map((d, i) =>
    !d.allowed &&
    (d.reason === undefined || d.reason === 'reserved') &&
    d.retryAfterMs > 0 &&
    Number.isFinite(d.retryAfterMs) &&
    plan.policies[i].compiled.algorithm.name === 'concurrency'
      ? { ...d, retryAfterMs: Math.min(d.retryAfterMs, Math.max(1, holdMs)), moreQuotaMs: Math.min(d.moreQuotaMs, Math.max(1, holdMs)) }
      : d,
  );
}

/**
 * A promise that rejects with `error` one microtask later, once Nest (which awaits every guard) has a
 * handler on it. Not a synchronous throw: from here, deep in the adapter's stack, V8 walks that stack for
 * the error's location (a 429 on Fastify: ~64 → ~51 µs of app CPU). Not `Promise.reject`: a promise
 * rejected before it has a handler is tracked by V8 and Node as a possible unhandled rejection, then
 * untracked when the handler comes (~1.3 µs per 429 in Nest's guard chain, against ~0.2 µs for this).
 */
export async function rejectSoon(error: Error): Promise<never> {
  await undefined;
  throw error;
}
