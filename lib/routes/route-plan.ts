import type { ExecutionContext } from '@nestjs/common';
import type { AlgorithmParams } from '../algorithms/algorithm.interface';
import type { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { policyMember } from '../http/rate-limit-headers';
import type { CalendarWindow, Duration, RateLimitPolicy, RateLimitTracker } from '../interfaces/policy.interface';
import type { PolicyRequest } from '../pipeline/rate-limit.engine';
import { MemoryStore } from '../stores/memory/memory.store';
import { MAX_POLICIES_PER_DECISION, type RateLimitStore } from '../stores/store.interface';
import { assertCostFits, compilePolicy, cost as validCost, resolveParams, type CompiledPolicy } from '../policy/compile-policy';
import { policyWhere } from '../policy/policy-overrides';
import { overriddenParams, type OverrideNumbers } from '../policy/runtime-overrides';
import { compileAdaptivePolicy, isAdaptivePolicy } from '../overload/adaptive-policy';
import { RouteAdaptivePolicy } from './route-adaptive';
import type { UserFunctionDeadlines } from './user-function-deadlines';

/** Most distinct dynamic policy shapes whose header member is remembered per policy. */
const MAX_MEMBERS = 256;

/** One policy of a route, compiled once, with its header member precomputed when its shape is fixed. */
export class PlannedPolicy {
  /** This policy's request when its limit, window and cost are all fixed: built once, shared by every call. */
  readonly staticRequest: PolicyRequest | undefined;
  /** The params when they never change (not a calendar window's, which move on with the period). */
  private readonly fixedParams: AlgorithmParams | undefined;
  private readonly staticMember: string | undefined;
  private readonly members = new Map<string, string>();

  constructor(
    readonly compiled: CompiledPolicy,
    /** Where the policy was declared, for error messages. */
    readonly where: string,
  ) {
    const params = compiled.calendars === undefined ? compiled.staticParams : undefined;
    this.fixedParams = params;
    this.staticMember = params && policyMember(compiled.name, params, compiled.algorithm, compiled.policy.quotaUnit);
    if (params && compiled.staticCost !== undefined) this.staticRequest = { compiled, params, cost: compiled.staticCost };
  }

  /**
   * This request's limit, window and cost: precomputed, or from the policy's functions of the context, each
   * bounded by `deadlines` when it returns a promise. A calendar window's periods are computed at `store`'s
   * time (see {@link storeNow}).
   */
  async request(
    context: ExecutionContext,
    deadlines: UserFunctionDeadlines,
    store: RateLimitStore,
    override?: OverrideNumbers,
  ): Promise<PolicyRequest> {
    const { compiled } = this;
    const { limit, window, cost } = compiled.policy;
    // A runtime override's limit or window replaces the policy's: its function is not called.
    const params =
      this.fixedParams ??
      resolveParams(
        compiled,
        override?.limit ?? (await this.valueOf<number>(limit, 'limit', context, deadlines)),
        (compiled.calendars === undefined ? override?.windowMs : undefined) ??
          (await this.valueOf<Duration | CalendarWindow>(window, 'window', context, deadlines)),
        this.where,
        compiled.calendars && storeNow(store),
      );
    const units = compiled.staticCost ?? validCost(await this.valueOf<number>(cost, 'cost', context, deadlines), `${this.where}: cost`);
    return { compiled, params: override ? overriddenParams(compiled, params, override) : params, cost: units };
  }

  /** Names one of this policy's fields for an error, e.g. `@RateLimit on C.h, policy 2 of 2 ('b'): by`. */
  describe(field: string): string {
    return `${this.where} ('${this.compiled.name}'): ${field}`;
  }

  private valueOf<T>(
    value: T | ((context: ExecutionContext) => T | Promise<T>) | undefined,
    field: string,
    context: ExecutionContext,
    deadlines: UserFunctionDeadlines,
  ): T | Promise<T> {
    if (typeof value !== 'function') return value as T;
    return deadlines.bound((value as (context: ExecutionContext) => T | Promise<T>)(context), () => this.describe(field));
  }

  /** The `RateLimit-Policy` member for `params` (memoised per shape for dynamic limits and runtime overrides). */
  member(params: AlgorithmParams): string {
    if (params === this.fixedParams && this.staticMember !== undefined) return this.staticMember;
    const shape = `${params.limit}/${params.windowMs}/${params.burst}`;
    let member = this.members.get(shape);
    if (member === undefined) {
      member = policyMember(this.compiled.name, params, this.compiled.algorithm, this.compiled.policy.quotaUnit);
      if (this.members.size >= MAX_MEMBERS) this.members.clear();
      this.members.set(shape, member);
    }
    return member;
  }
}

/**
 * The time calendar windows are computed at: the store's own clock when it decides in-process (it may be a
 * test clock, set to a DST night), else this host's, which Redis's `TIME` follows closely.
 */
export function storeNow(store: RateLimitStore): number {
  return store instanceof MemoryStore ? store.now() : Date.now();
}

/** Policies of a route that share one tracker, decided in one engine call (one round trip). */
export interface TrackerGroup {
  by: RateLimitTracker | undefined;
  /** Indexes into {@link RoutePlan.policies}. */
  indexes: number[];
  /**
   * When every policy in it is fixed (the usual case), its requests and its `RateLimit-Policy` value, built
   * once: no per-call work at all.
   */
  fixed: { requests: PolicyRequest[]; policyHeader: string } | undefined;
}

/** Everything the guard needs for one handler, built once at bootstrap (or on first use). */
export interface RoutePlan {
  /** `Controller.handler`, for logs. */
  route: string;
  policies: PlannedPolicy[];
  groups: TrackerGroup[];
  /** Some policy acts when the response ends (`countOnly`, `concurrency`, `settle`). */
  settles: boolean;
  /**
   * Some policy acts only once the handler has settled too (`concurrency` leases, and `settle`, which is
   * given what the handler returned): such HTTP routes get the interceptor that reports it.
   */
  awaitsHandler: boolean;
  /**
   * Some policy is `concurrency`: its lease is held until the handler's work has ended (the response is over
   * and the handler has settled, whichever is later), not only until the socket closed.
   */
  holdsLeases: boolean;
  /** How long this route's `concurrency` leases are held, when it has any (they are released with the call). */
  leaseHold: LeaseHoldEstimate | undefined;
  /** Indexes of the policies that have a `skipIf`; `undefined` when none has (the usual route: nothing to ask). */
  skippable: number[] | undefined;
  /** The plans of this route without some policies, by bit mask of the skipped indexes; built on first use. */
  variants: Map<number, RoutePlan | null> | undefined;
  /**
   * The route's adaptive policies (`algorithm: 'adaptive'`), decided in-process before the store is asked and
   * settled when the call ends; not among {@link policies}, which the store decides.
   */
  adaptive: RouteAdaptivePolicy[] | undefined;
  /** Some policy has a `reserve`: the call's criticality decides what it may take. */
  reserves: boolean;
}

/**
 * A running estimate of how long a route's `concurrency` leases are held, from the leases released so far:
 * an exponentially weighted moving average (each release weighs 1/4), so it follows a slower or faster
 * handler within a few calls. A rejection's `Retry-After` is this estimate (capped by the soonest lease
 * expiry) rather than the lease TTL, as a slot typically frees much sooner. One number, no timers.
 */
export class LeaseHoldEstimate {
  private estimateMs: number | undefined;

  /** The estimate in ms; `undefined` until a lease of the route has been released. */
  get ms(): number | undefined {
    return this.estimateMs;
  }

  /** Takes in one released lease, held `heldMs`. */
  record(heldMs: number): void {
    const held = Math.max(heldMs, 0);
    this.estimateMs = this.estimateMs === undefined ? held : this.estimateMs + (held - this.estimateMs) / 4;
  }
}

/** Where a route's policies come from, for the plan's error messages. */
export interface PlanSource {
  policies: RateLimitPolicy[];
  /** Prefix of error messages, e.g. `@RateLimit on CatsController.find`. */
  where: string;
  /**
   * Where each policy was declared, when they come from more than one place (an override merged into an
   * inherited policy); otherwise each is `where`, numbered when there are several.
   */
  wheres?: readonly string[];
  /** `Controller.handler`. */
  route: string;
  /** Counter scope of policies without `scope`, e.g. `r=CatsController.find`. */
  scopeKey: string;
  /** Policy names `@SkipRateLimit('name')` exempts the route from, on the handler and on its class. */
  skip?: { onHandler: readonly string[]; onClass: readonly string[] };
}

/**
 * Validates and compiles a route's policies; throws a {@link RateLimitConfigError} naming the field, also for a
 * fixed cost no request could ever fit ({@link assertCostFits}).
 */
export function buildRoutePlan(
  { policies, where, wheres, route, scopeKey, skip }: PlanSource,
  registry: RateLimitAlgorithmRegistry,
): RoutePlan {
  if (!Array.isArray(policies) || policies.length === 0) {
    throw new RateLimitConfigError(`${where}: expected a policy or a non-empty array of policies; use @SkipRateLimit() to exempt a route.`);
  }
  if (policies.length > MAX_POLICIES_PER_DECISION) {
    throw new RateLimitConfigError(
      `${where}: ${policies.length} policies on one route; at most ${MAX_POLICIES_PER_DECISION} are decided together.`,
    );
  }
  const planned: PlannedPolicy[] = [];
  const adaptive: RouteAdaptivePolicy[] = [];
  policies.forEach((policy, i) => {
    const at = wheres?.[i] ?? policyWhere(where, i, policies.length);
    if (isAdaptivePolicy(policy)) return void adaptive.push(new RouteAdaptivePolicy(compileAdaptivePolicy(policy, at)));
    const compiled = compilePolicy(policy, registry, at, scopeKey);
    assertCostFits(compiled, at);
    planned.push(new PlannedPolicy(compiled, at));
  });
  assertDistinctNames([...planned.map((p) => p.compiled.name), ...adaptive.map((a) => a.compiled.name)], where);
  if (!skip) return planOf(route, planned, undefined, adaptive);
  const names = [...planned.map(({ compiled }) => compiled.name), ...adaptive.map(({ compiled }) => compiled.name)];
  for (const name of skip.onHandler) {
    if (!names.includes(name)) {
      throw new RateLimitConfigError(
        `@SkipRateLimit on ${route}: '${name}' names no policy of the route (its policies: ${names.map((n) => `'${n}'`).join(', ')}).`,
      );
    }
  }
  const skipped = new Set([...skip.onHandler, ...skip.onClass]);
  return planOf(
    route,
    planned.filter(({ compiled }) => !skipped.has(compiled.name)),
    undefined,
    adaptive.filter(({ compiled }) => !skipped.has(compiled.name)),
  );
}

/**
 * The plan of `policies` and `adaptive` ones (already validated), with everything the request path needs
 * precomputed. Adaptive policies act when the call ends, once its handler has settled, as leases do.
 */
function planOf(route: string, policies: PlannedPolicy[], leaseHold?: LeaseHoldEstimate, adaptive?: RouteAdaptivePolicy[]): RoutePlan {
  const holdsLeases = policies.some(({ compiled }) => compiled.algorithm.name === 'concurrency');
  const adapts = adaptive !== undefined && adaptive.length > 0;
  const skippable = policies.flatMap(({ compiled }, i) => (compiled.policy.skipIf ? [i] : []));
  return {
    route,
    policies,
    groups: groupByTracker(policies),
    settles:
      adapts ||
      policies.some(
        ({ compiled }) =>
          compiled.policy.countOnly !== undefined || compiled.policy.settle !== undefined || compiled.algorithm.name === 'concurrency',
      ),
    awaitsHandler: adapts || holdsLeases || policies.some(({ compiled }) => compiled.policy.settle !== undefined),
    holdsLeases,
    leaseHold: holdsLeases ? (leaseHold ?? new LeaseHoldEstimate()) : undefined,
    skippable: skippable.length > 0 ? skippable : undefined,
    variants: skippable.length > 0 ? new Map() : undefined,
    adaptive: adapts ? adaptive : undefined,
    reserves: policies.some(({ compiled }) => compiled.reserve !== undefined),
  };
}

/**
 * `plan` without the policies whose bits are set in `skipped` (indexes into `plan.policies`), or `null` when
 * none is left; built once per combination (at most 2^8) and kept on the plan. It shares the policies (their
 * counters and header members) and the lease-hold estimate with `plan`, and has no `skipIf` left to ask.
 */
export function planWithout(plan: RoutePlan, skipped: number): RoutePlan | null {
  if (skipped === 0) return plan;
  let variant = plan.variants!.get(skipped);
  if (variant === undefined) {
    const kept = plan.policies.filter((_, i) => (skipped & (1 << i)) === 0);
    // The adaptive policies have no skipIf: every variant keeps them (and their limiters).
    variant =
      kept.length === 0 && plan.adaptive === undefined
        ? null
        : { ...planOf(plan.route, kept, plan.leaseHold, plan.adaptive), skippable: undefined, variants: undefined };
    plan.variants!.set(skipped, variant);
  }
  return variant;
}

function groupByTracker(policies: readonly PlannedPolicy[]): TrackerGroup[] {
  const groups = new Map<unknown, TrackerGroup>();
  policies.forEach(({ compiled }, index) => {
    const by = compiled.policy.by ?? 'ip';
    const group = groups.get(by) ?? { by, indexes: [], fixed: undefined };
    group.indexes.push(index);
    groups.set(by, group);
  });
  for (const group of groups.values()) {
    const requests = group.indexes.map((i) => policies[i].staticRequest);
    if (requests.every((request) => request !== undefined)) {
      const policyHeader = group.indexes.map((i, n) => policies[i].member(requests[n]!.params)).join(', ');
      group.fixed = { requests: requests as PolicyRequest[], policyHeader };
    }
  }
  return [...groups.values()];
}

function assertDistinctNames(names: readonly string[], where: string): void {
  const seen = new Set<string>();
  for (const name of names) {
    if (seen.has(name)) {
      throw new RateLimitConfigError(`${where}: name: two policies are named '${name}'; give each policy of a route its own name.`);
    }
    seen.add(name);
  }
}
