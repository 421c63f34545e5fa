import { Inject, Injectable, Optional, type CanActivate, type ExecutionContext, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimitContexts } from './contexts/create-context';
import type { RateLimitContextAdapter } from './contexts/rate-limit-context';
import { headerProfile } from './http/header-profiles';
import { IpTrackers } from './http/tracker';
import { RateLimitHolds } from './http/request-holds';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import { RateLimitEngine } from './pipeline/rate-limit.engine';
import { RATE_LIMIT_OPTIONS } from './rate-limit.module-definition';
import { RateLimitAdaptiveLimits } from './overload/adaptive-limits';
import { CallCriticalities } from './overload/call-criticality';
import type { RateLimitCriticality } from './interfaces/overload.interface';
import type { LoadShedder } from './overload/load-shedder';
import { RateLimitLoadShedding } from './overload/rate-limit-load-shedding';
import { AdaptiveAdmission } from './routes/route-adaptive';
import { decideRoute, routeTrackers, type RouteOutcome, type RouteTracker } from './routes/decide-route';
import type { RoutePlan } from './routes/route-plan';
import { RateLimitRouteRegistry } from './routes/route-registry';
import { rejectSoon, RouteResponder } from './routes/route-responder';
import { RouteSkips } from './routes/route-skips';
import { UserFallbackWarnings } from './routes/user-fallback-warnings';
import { UserFunctionDeadlines } from './routes/user-function-deadlines';
import type { StringMemo } from './shared/string-memo';

/** Re-exported for bench/http-app.ts, which answers the way the guard does. */

/** The message of a call the load shedder refuses. */
const SHED_MESSAGE = 'Service Unavailable: this instance is shedding load; retry later.';

/** `userFunctionTimeoutMs`'s default. */
const DEFAULT_USER_FUNCTION_TIMEOUT_MS = 5_000;

/**
 * Applies the handler's policies to every call: controllers, GraphQL resolvers, WebSocket gateways and
 * microservice handlers (module option `contexts`). Registered as `APP_GUARD` by `RateLimitModule` (unless
 * `registerGuard: false`, then use `@UseGuards(RateLimitGuard)`). Over HTTP and GraphQL it rejects with a
 * `RateLimitExceededException` (429) or, when the store is down and `onStoreError` is `'fail-closed'`, a
 * `RateLimitStoreUnavailableException` (503), and when this instance is short of capacity (an adaptive limit,
 * `loadShedding`) with a `RateLimitOverloadedException` (503 with `Retry-After`; a GraphQL error coded
 * `SERVICE_UNAVAILABLE`); gateways get a `WsException` and microservices an `RpcException` carrying the same
 * status, message and `retryAfter`. While the store is down, a rejection by the `insurance` fallback (the
 * default) is a 429 like any other, with the in-process twin's wait. A
 * policy function (`by`, `limit`, `window`, `cost`) whose promise has not settled within
 * `userFunctionTimeoutMs` fails the call (HTTP 500, the error naming the policy and the function), and what
 * the call had already taken is given back.
 */
@Injectable()
export class RateLimitGuard implements CanActivate, OnApplicationShutdown {
  private readonly trackers: StringMemo<RouteTracker>;
  private readonly ips: IpTrackers;
  private readonly contexts: RateLimitContexts;
  private readonly deadlines: UserFunctionDeadlines;
  /** Which policies a call is exempt from (`ignoreUserAgents`, `skipIf`). */
  private readonly skips: RouteSkips;
  /** Writes headers, rejects, holds for shaping and arranges what happens when the call ends. */
  private readonly responder: RouteResponder;
  /** Warns once per route about `by: 'user'` calls that came without a user (limited per IP). */
  private readonly userFallbacks = new UserFallbackWarnings();
  /** Each call's criticality, for the shedder, adaptive limits partitioned by it and policies' `reserve`. */
  private readonly criticalities: CallCriticalities;
  /** Where the adaptive limits' admissions are told (the module's event bus). */
  private readonly adaptiveLimits: RateLimitAdaptiveLimits;
  /** Option `loadShedding`'s shedder, when it is set. */
  private readonly shedder: LoadShedder | undefined;

  constructor(
    private readonly routes: RateLimitRouteRegistry,
    private readonly engine: RateLimitEngine,
    holds: RateLimitHolds,
    @Inject(RATE_LIMIT_OPTIONS) options: RateLimitModuleOptions,
    @Optional() shedding?: RateLimitLoadShedding,
    @Optional() adaptiveLimits?: RateLimitAdaptiveLimits,
  ) {
    this.adaptiveLimits = adaptiveLimits ?? new RateLimitAdaptiveLimits(options.hooks, options.nearLimitRatio);
    this.trackers = routeTrackers(options.prefix);
    this.ips = new IpTrackers(options.ipv6Subnet ?? 64);
    const profile = headerProfile(options.headerProfile);
    this.contexts = new RateLimitContexts(options, profile);
    this.deadlines = new UserFunctionDeadlines(options.userFunctionTimeoutMs ?? DEFAULT_USER_FUNCTION_TIMEOUT_MS);
    this.skips = new RouteSkips(options, this.deadlines);
    this.responder = new RouteResponder({ engine, holds, options, profile, deadlines: this.deadlines });
    this.criticalities = new CallCriticalities(options.priority);
    this.shedder = shedding?.shedder;
  }

  /**
   * Plans, decides, answers. `true` without a promise when the store decides in-process and the route needs no
   * waiting; a rejection is always a rejected promise (never a synchronous throw).
   */
  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    const type = this.contexts.limited(context);
    if (!type) return true;
    // Shedding refuses before anything else is looked at: a process under pressure spends nothing on the call.
    // The call's criticality is found once: the shedder's and the adaptive limits' (the module's `priority` runs once).
    let criticality: RateLimitCriticality | undefined;
    if (this.shedder !== undefined && this.shedder.level !== 'none') {
      criticality = this.criticalities.of(context);
      if (this.shedder.refuses(criticality)) return this.shed(this.shedder, context, type);
    }
    const plan = this.routes.plan(context.getClass(), context.getHandler());
    if (!plan) return true;
    const caller = this.contexts.adapt(type, context);
    if (!caller.claim()) return true;
    const rest = this.skips.rest(context, caller, plan);
    if (rest instanceof Promise) return rest.then((left) => (left === null ? true : this.decide(context, caller, left, criticality)));
    return rest === null ? true : this.decide(context, caller, rest, criticality);
  }

  /** A call still waiting for a policy function is failed now (its deadline's ticker stops); no lease is renewed any more. */
  onApplicationShutdown(): void {
    this.deadlines.close();
    this.responder.close();
  }

  /**
   * Decides the call against `plan` and answers it. Adaptive limits decide first, in-process (a refusal costs
   * no store call), and only for calls whose end is heard: a WebSocket or RPC call would hold its slot for good.
   */
  private decide(
    context: ExecutionContext,
    caller: RateLimitContextAdapter,
    plan: RoutePlan,
    criticality: RateLimitCriticality | undefined,
  ): boolean | Promise<boolean> {
    if (plan.adaptive === undefined || !caller.hearsEnd)
      return plan.policies.length === 0 || this.decideStore(context, caller, plan, undefined, criticality);
    criticality ??= this.criticalities.of(context);
    const started = this.adaptiveLimits.started();
    const admission = AdaptiveAdmission.admit(plan.adaptive, criticality);
    this.adaptiveLimits.report(admission.admitted, admission.decisions, started);
    if (!admission.admitted) return rejectSoon(this.responder.refuse(caller, admission));
    if (plan.policies.length === 0) return this.responder.respond(context, caller, plan, admittedOnly(admission));
    try {
      const answer = this.decideStore(context, caller, plan, admission, criticality);
      return answer instanceof Promise ? answer.catch((error: unknown) => this.failed(admission, error)) : answer;
    } catch (error) {
      return this.failed(admission, error);
    }
  }

  /** The 503 of a call the load shedder refuses at its criticality. */
  private shed(
    shedder: LoadShedder,
    context: ExecutionContext,
    type: NonNullable<ReturnType<RateLimitContexts['limited']>>,
  ): Promise<never> {
    const refusal = { message: SHED_MESSAGE, retryAfter: shedder.retryAfterSeconds, decisions: [] };
    return rejectSoon(this.responder.overloaded(this.contexts.adapt(type, context), refusal));
  }

  /** A policy function failed or the store threw: the call does not go ahead, so it measures nothing. */
  private failed(admission: AdaptiveAdmission, error: unknown): never {
    admission.cancel();
    throw error;
  }

  /**
   * Decides the store's policies of `plan` and answers the call, with `admission`'s part when it has one. The
   * call's criticality is found here if a policy's `reserve` needs it and nothing before did.
   */
  private decideStore(
    context: ExecutionContext,
    caller: RateLimitContextAdapter,
    plan: RoutePlan,
    admission: AdaptiveAdmission | undefined,
    criticality: RateLimitCriticality | undefined,
  ): boolean | Promise<boolean> {
    const outcome = decideRoute({
      plan,
      context,
      caller,
      engine: this.engine,
      trackers: this.trackers,
      ips: this.ips,
      deadlines: this.deadlines,
      userFallbacks: this.userFallbacks,
      criticality: plan.reserves ? (criticality ?? this.criticalities.of(context)) : undefined,
    });
    if (outcome instanceof Promise) return outcome.then((o) => this.responder.respond(context, caller, plan, withAdmission(o, admission)));
    return this.responder.respond(context, caller, plan, withAdmission(outcome, admission));
  }
}

/** The outcome of a route whose only policies are adaptive ones, all admitting the call. */
function admittedOnly(admission: AdaptiveAdmission): RouteOutcome {
  return { allowed: true, decisions: [], calls: [], policyHeader: '', trackers: '', nowMs: 0, admission };
}

function withAdmission(outcome: RouteOutcome, admission: AdaptiveAdmission | undefined): RouteOutcome {
  if (admission !== undefined) outcome.admission = admission;
  return outcome;
}
