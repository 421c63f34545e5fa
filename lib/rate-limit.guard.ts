import { Inject, Injectable, Logger, type CanActivate, type ExecutionContext, type OnApplicationShutdown } from '@nestjs/common';
import { IntervalWarning } from './shared/interval-warning';
import { RateLimitContexts } from './contexts/create-context';
import type { RateLimitContextAdapter, RateLimitRejection } from './contexts/rate-limit-context';
import { HttpExchange } from './http/http-exchange';
import { problemRejection, problemUnavailable } from './contexts/problem-details';
import { headerProfile, type RateLimitHeaderProfile } from './http/header-profiles';
import { isViolated, retryAfterSeconds, writeRateLimitHeaders } from './http/rate-limit-headers';
import { IpTrackers } from './http/tracker';
import { RateLimitHolds } from './http/request-holds';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import { failedClosed, RateLimitEngine } from './pipeline/rate-limit.engine';
import { RATE_LIMIT_OPTIONS } from './rate-limit.module-definition';
import { charged } from './pipeline/charges';
import { decideRoute, trackerOf, type RouteOutcome } from './routes/decide-route';
import { LeaseHeartbeats } from './routes/lease-heartbeats';
import { planWithout, type RoutePlan } from './routes/route-plan';
import { RateLimitRouteRegistry } from './routes/route-registry';
import { RouteSettlements } from './routes/route-settlement';
import { UserFunctionDeadlines } from './routes/user-function-deadlines';
import type { RateLimitCall } from './stores/store.interface';
import { trackerKeyPrefixes } from './shared/keys';
import type { StringMemo } from './shared/string-memo';

const describeModuleSkipIf = () => 'RateLimitModule options: skipIf';

/** `userFunctionTimeoutMs`'s default. */
const DEFAULT_USER_FUNCTION_TIMEOUT_MS = 5_000;

/**
 * Applies the handler's policies to every call: controllers, GraphQL resolvers, WebSocket gateways and
 * microservice handlers (module option `contexts`). Registered as `APP_GUARD` by `RateLimitModule` (unless
 * `registerGuard: false`, then use `@UseGuards(RateLimitGuard)`). Over HTTP and GraphQL it rejects with a
 * `RateLimitExceededException` (429) or, when the store is down and `onStoreError` is `'fail-closed'`, a
 * `RateLimitStoreUnavailableException` (503); gateways get a `WsException` and microservices an
 * `RpcException` carrying the same status, message and `retryAfter`. While the store is down, a rejection
 * by the `insurance` fallback (the default) is a 429 like any other, with the in-process twin's wait. A
 * policy function (`by`, `limit`, `window`, `cost`) whose promise has not settled within
 * `userFunctionTimeoutMs` fails the call (HTTP 500, the error naming the policy and the function), and what
 * the call had already taken is given back.
 */
@Injectable()
export class RateLimitGuard implements CanActivate, OnApplicationShutdown {
  private readonly logger = new Logger('RateLimitGuard');
  private readonly trackerPrefixes: StringMemo<string>;
  private readonly ips: IpTrackers;
  private readonly contexts: RateLimitContexts;
  private readonly deadlines: UserFunctionDeadlines;
  private readonly settlements: RouteSettlements;
  /** Renews the `concurrency` leases of HTTP calls whose work is still running. */
  private readonly heartbeats: LeaseHeartbeats;
  private readonly storeFailure = new IntervalWarning('RateLimitGuard');
  /** How the `RateLimit` field reads (module option `headerProfile`). */
  private readonly profile: RateLimitHeaderProfile;
  /** Per plan, the policies its headers show when some are hidden (null: all are); see shownPolicies. */
  private readonly shown = new WeakMap<RoutePlan, number[] | null>();
  /** `ignoreUserAgents` without the `g` and `y` flags (which make `test` stateful); `undefined` when empty. */
  private readonly ignoredAgents: RegExp[] | undefined;
  /** The module exempts some calls (`skipIf`, `ignoreUserAgents`): only then is any call asked about it. */
  private readonly skipsCalls: boolean;

  constructor(
    private readonly routes: RateLimitRouteRegistry,
    private readonly engine: RateLimitEngine,
    private readonly holds: RateLimitHolds,
    @Inject(RATE_LIMIT_OPTIONS) private readonly options: RateLimitModuleOptions,
  ) {
    this.trackerPrefixes = trackerKeyPrefixes(options.prefix);
    this.ips = new IpTrackers(options.ipv6Subnet ?? 64);
    this.profile = headerProfile(options.headerProfile);
    this.contexts = new RateLimitContexts(options, this.profile);
    this.deadlines = new UserFunctionDeadlines(options.userFunctionTimeoutMs ?? DEFAULT_USER_FUNCTION_TIMEOUT_MS);
    this.settlements = new RouteSettlements(engine, this.deadlines);
    this.heartbeats = new LeaseHeartbeats(engine.store);
    const agents = options.ignoreUserAgents ?? [];
    this.ignoredAgents = agents.length > 0 ? agents.map((r) => new RegExp(r.source, r.flags.replace(/[gy]/g, ''))) : undefined;
    this.skipsCalls = this.ignoredAgents !== undefined || options.skipIf !== undefined;
  }

  /**
   * `true` without a promise when the store decides in-process and the route needs no waiting; a rejection
   * is always a rejected promise (never a synchronous throw).
   */
  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    const type = this.contexts.limited(context);
    if (!type) return true;
    const plan = this.routes.plan(context.getClass(), context.getHandler());
    if (!plan) return true;
    const caller = this.contexts.adapt(type, context);
    if (!caller.claim()) return true;
    if (this.skipsCalls || plan.skippable !== undefined) return this.decideUnlessSkipped(context, caller, plan);
    return this.decide(context, caller, plan);
  }

  /** Decides the call against `plan` and answers it. */
  private decide(context: ExecutionContext, caller: RateLimitContextAdapter, plan: RoutePlan): boolean | Promise<boolean> {
    const outcome = decideRoute({
      plan,
      context,
      caller,
      engine: this.engine,
      trackerPrefixes: this.trackerPrefixes,
      ips: this.ips,
      deadlines: this.deadlines,
    });
    if (outcome instanceof Promise) return outcome.then((o) => this.conclude(context, caller, plan, o));
    return this.conclude(context, caller, plan, outcome);
  }

  /**
   * The call on a route or module that can exempt it: `ignoreUserAgents`, then the module's `skipIf` (any
   * of them exempts it from every policy), then the policies' own `skipIf` (each exempts it from its policy).
   */
  private decideUnlessSkipped(context: ExecutionContext, caller: RateLimitContextAdapter, plan: RoutePlan): boolean | Promise<boolean> {
    if (this.ignoredAgents && caller instanceof HttpExchange && this.isIgnoredAgent(caller)) return true;
    const { skipIf } = this.options;
    if (skipIf) {
      const skip = this.deadlines.bound(skipIf(context), describeModuleSkipIf);
      if (skip instanceof Promise) return skip.then((yes) => (yes ? true : this.decidePolicies(context, caller, plan)));
      if (skip) return true;
    }
    return this.decidePolicies(context, caller, plan);
  }

  /** Asks each policy's `skipIf`, then decides the call against the policies that are left. */
  private decidePolicies(context: ExecutionContext, caller: RateLimitContextAdapter, plan: RoutePlan): boolean | Promise<boolean> {
    const { skippable } = plan;
    if (skippable === undefined) return this.decide(context, caller, plan);
    const answers = skippable.map((i) => {
      const policy = plan.policies[i];
      return this.deadlines.bound(policy.compiled.policy.skipIf!(context), () => policy.describe('skipIf'));
    });
    const decideRest = (skips: readonly boolean[]) => {
      let mask = 0;
      skips.forEach((skip, n) => {
        if (skip) mask |= 1 << skippable[n];
      });
      const rest = planWithout(plan, mask);
      return rest === null ? true : this.decide(context, caller, rest);
    };
    if (answers.some((a) => a instanceof Promise)) return Promise.all(answers).then(decideRest);
    return decideRest(answers as boolean[]);
  }

  private isIgnoredAgent(exchange: HttpExchange): boolean {
    const agent = exchange.request.headers['user-agent'];
    if (typeof agent !== 'string') return false;
    for (const pattern of this.ignoredAgents!) if (pattern.test(agent)) return true;
    return false;
  }

  /** Answers the call: headers, then a rejected promise, or a pass (after the shaping delay, if any). */
  private conclude(
    context: ExecutionContext,
    caller: RateLimitContextAdapter,
    plan: RoutePlan,
    outcome: RouteOutcome,
  ): boolean | Promise<boolean> {
    if (!outcome.allowed && plan.leaseHold?.ms !== undefined) outcome.decisions = leaseHint(plan, outcome.decisions, plan.leaseHold.ms);
    this.writeHeaders(caller, plan, outcome);
    this.reportShadow(plan, outcome);
    if (!outcome.allowed) return rejectSoon(this.rejection(context, caller, outcome));
    if (plan.settles) this.settleOnEnd(context, caller, plan, outcome);
    const delayMs = this.shapingDelay(plan, outcome.decisions);
    return delayMs > 0 ? this.holds.hold(delayMs).then(() => true) : true;
  }

  /**
   * Headers for the call's enforced policies. Shadow policies measure silently: they are left out unless
   * `shadowHeaders` is on (a trial policy's `r=0` would otherwise make clients slow down for nothing).
   */
  private writeHeaders(caller: RateLimitContextAdapter, plan: RoutePlan, outcome: RouteOutcome): void {
    const mode = this.options.headers ?? 'ietf';
    if (mode === 'none') return;
    const shown = this.shownPolicies(plan);
    const { profile } = this;
    if (shown === undefined) {
      const { policyHeader, decisions, calls: policies } = outcome;
      return writeRateLimitHeaders(caller, { mode, profile, policyHeader, decisions, policies });
    }
    if (shown.length === 0) return;
    writeRateLimitHeaders(caller, {
      mode,
      profile,
      policyHeader: shown.map((i) => plan.policies[i].member(outcome.calls[i].params)).join(', '),
      decisions: shown.map((i) => outcome.decisions[i]),
      policies: shown.map((i) => outcome.calls[i]),
    });
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
   * `fail-closed` policy met a failed store, else a 429 (an `insurance` fallback's rejection included).
   */
  private rejection(context: ExecutionContext, call: RateLimitContextAdapter, { decisions, calls }: RouteOutcome): Error {
    if (decisions.some((d, i) => failedClosed(d, calls[i]))) {
      return this.problemDetails(call) ? problemUnavailable(call) : call.unavailable();
    }
    const rejecting = decisions.filter(isViolated);
    const retryAfter = retryAfterSeconds(rejecting);
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

  /** A call still waiting for a policy function is failed now (its deadline's ticker stops); no lease is renewed any more. */
  onApplicationShutdown(): void {
    this.deadlines.close();
    this.heartbeats.close();
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
 * but never past its soonest lease expiry: a slot typically frees long before the lease's TTL. Lockouts,
 * fallbacks and requests that can never fit keep their own wait.
 */
function leaseHint(plan: RoutePlan, decisions: RateLimitDecision[], holdMs: number): RateLimitDecision[] {
  return decisions.map((d, i) =>
    !d.allowed &&
    d.reason === undefined &&
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
