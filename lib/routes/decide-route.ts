import type { ExecutionContext } from '@nestjs/common';
import { resolveTracker, userTracker, type IpTrackers, type TrackerSource } from '../http/tracker';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitCriticality } from '../interfaces/overload.interface';
import { charged, decidedAt } from '../pipeline/charges';
import {
  newTrackerKeys,
  type EngineDecision,
  type PolicyRequest,
  type RateLimitEngine,
  type TrackerKeys,
} from '../pipeline/rate-limit.engine';
import type { RateLimitCall } from '../stores/store.interface';
import { UnmatchedOverrides } from '../pipeline/override-copy';
import { trackerKeyPrefix } from '../shared/keys';
import { StringMemo } from '../shared/string-memo';
import type { AdaptiveAdmission } from './route-adaptive';
import type { RoutePlan, TrackerGroup } from './route-plan';
import type { UserFallbackWarnings } from './user-fallback-warnings';
import type { UserFunctionDeadlines } from './user-function-deadlines';

/** What one request needs to be decided against its route's plan. */
export interface RouteDecisionInput {
  plan: RoutePlan;
  context: ExecutionContext;
  /** Who is calling, as the call's kind of context sees it. */
  caller: TrackerSource;
  engine: RateLimitEngine;
  /** Each tracker's keys and the overrides it matched, remembered for recent trackers (see {@link routeTrackers}). */
  trackers: StringMemo<RouteTracker>;
  /** `ip:` trackers of recent client addresses. */
  ips: IpTrackers;
  /** Bounds the policies' own functions (`by`, `limit`, `window`, `cost`) that return a promise. */
  deadlines: UserFunctionDeadlines;
  /** Told of `by: 'user'` calls without a user, which count per IP address (warned once per route). */
  userFallbacks: UserFallbackWarnings;
  /** The call's criticality, when a policy's `reserve` needs it; `'default'` otherwise. */
  criticality?: RateLimitCriticality;
}

/** A tracker as the guard remembers it: its keys (under `<prefix>:{<tracker>}:`), and the runtime overrides it matched. */
export class RouteTracker extends UnmatchedOverrides {
  constructor(readonly keys: TrackerKeys) {
    super();
  }
}

/**
 * The guard's memo of recent trackers under the module's `prefix`: each holds the tracker's keys, so a decision
 * finds them with this one lookup (as the service's memo does).
 */
export function routeTrackers(prefix = 'rl'): StringMemo<RouteTracker> {
  return new StringMemo((tracker) => new RouteTracker(newTrackerKeys(trackerKeyPrefix(prefix, tracker))));
}

/** The decision of every policy of a route; arrays are aligned with `plan.policies`. */
export interface RouteOutcome {
  allowed: boolean;
  decisions: RateLimitDecision[];
  /** The store calls, to refund or release after the response (`countOnly`, `concurrency`). */
  calls: RateLimitCall[];
  /** The `RateLimit-Policy` value: one member per policy, in order. */
  policyHeader: string;
  /** The tracker each policy was decided for; one string when they all were decided for the same one. */
  trackers: string | string[];
  /** The store's time each policy was decided at (ms); one number when they all were decided at once. */
  nowMs: number | number[];
  /** The route's adaptive policies' part, which admitted the call (see AdaptiveAdmission); none on most routes. */
  admission?: AdaptiveAdmission;
}

/** The tracker policy `i` of `outcome` was decided for. */
export function trackerOf({ trackers }: RouteOutcome, i: number): string {
  return typeof trackers === 'string' ? trackers : trackers[i];
}

interface GroupResult {
  group: TrackerGroup;
  tracker: string;
  requests: readonly PolicyRequest[];
  result: EngineDecision;
}

/**
 * Decides every policy of a route. Policies sharing a tracker go to the engine in one call (atomic: all
 * pass or none is charged). Policies on different trackers live in different hash slots, so they are
 * decided in parallel and, when any rejects, the groups that were charged are refunded.
 * The usual route (one tracker known without waiting, fixed limits) makes no promise of its own, and none
 * at all on a store that decides in-process.
 */
export function decideRoute(input: RouteDecisionInput): RouteOutcome | Promise<RouteOutcome> {
  const { groups } = input.plan;
  const { by, fixed } = groups[0];
  if (groups.length === 1 && fixed && typeof by !== 'function') return decideStatic(groups[0], fixed, by, input);
  return decideGroups(input);
}

/** One group (so it covers every policy, in order) with fixed requests: its result is the outcome as it is. */
function decideStatic(
  group: TrackerGroup,
  fixed: NonNullable<TrackerGroup['fixed']>,
  by: 'ip' | 'user' | undefined,
  input: RouteDecisionInput,
): RouteOutcome | Promise<RouteOutcome> {
  const { engine } = input;
  const tracker = builtInTracker(by, group, input);
  const known = input.trackers.get(tracker);
  // No runtime override anywhere (the usual case): one property read, nothing allocated.
  const { requests, policyHeader } = engine.overrides.active ? overriddenFixed(group, fixed, tracker, known, input) : fixed;
  const result = engine.decideNowOrLater(known.keys, requests, 'consume', input.criticality);
  if (result instanceof Promise) return result.then((r) => staticOutcome(r, policyHeader, tracker));
  return staticOutcome(result, policyHeader, tracker);
}

/**
 * A fixed group's requests and `RateLimit-Policy` value with the runtime overrides matching `tracker` applied:
 * `fixed` itself when none matches; for a group of one policy, built once per override.
 */
function overriddenFixed(
  group: TrackerGroup,
  fixed: NonNullable<TrackerGroup['fixed']>,
  tracker: string,
  known: RouteTracker,
  { engine: { overrides }, plan }: RouteDecisionInput,
): NonNullable<TrackerGroup['fixed']> {
  if (fixed.requests.length === 1) {
    const request = fixed.requests[0];
    const entry = overrides.matchFor(known, request.compiled.name, tracker);
    if (entry === undefined) return fixed;
    return overrides.built(entry, fixed, () => {
      const requests = [{ ...request, params: overrides.params(request.compiled, request.params, entry) }];
      return { requests, policyHeader: headerOf(group, requests, plan) };
    });
  }
  const requests = overrides.apply(fixed.requests, tracker, known);
  return requests === fixed.requests ? fixed : { requests: requests as PolicyRequest[], policyHeader: headerOf(group, requests, plan) };
}

/** The `RateLimit-Policy` value of `group`'s requests. */
function headerOf(group: TrackerGroup, requests: readonly PolicyRequest[], plan: RoutePlan): string {
  return group.indexes.map((i, n) => plan.policies[i].member(requests[n].params)).join(', ');
}

/**
 * The tracker of `'ip'`, `'user'` or no `by` (see resolveTracker), which needs no waiting. A `by: 'user'` call
 * without a user counts per IP address, as it always has, and the route's first such call is warned about.
 */
function builtInTracker(
  by: 'ip' | 'user' | undefined,
  group: TrackerGroup,
  { caller, ips, plan, userFallbacks }: RouteDecisionInput,
): string {
  if (by !== 'user') return caller.defaultTracker(ips);
  const user = userTracker(caller.user);
  if (user !== undefined) return user;
  userFallbacks.anonymous(plan, group, caller);
  return caller.defaultTracker(ips);
}

function staticOutcome({ allowed, decisions, calls, nowMs }: EngineDecision, policyHeader: string, tracker: string): RouteOutcome {
  return { allowed, decisions, calls, policyHeader, trackers: tracker, nowMs };
}

async function decideGroups(input: RouteDecisionInput): Promise<RouteOutcome> {
  const settled = await Promise.allSettled(input.plan.groups.map((group) => decideGroup(group, input)));
  const results = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failure) {
    // A tracker or limit function threw or missed its deadline: the request fails, so it must not cost the
    // other groups anything.
    await refundCharged(results, input.engine);
    throw failure.reason;
  }
  const allowed = results.every(({ result }) => result.allowed);
  if (!allowed && results.length > 1) await refundCharged(results, input.engine);
  return assemble(results, allowed, input.plan);
}

async function decideGroup(group: TrackerGroup, input: RouteDecisionInput): Promise<GroupResult> {
  const { plan, context, caller, engine, trackers, ips, deadlines, criticality } = input;
  const { by } = group;
  const { overrides } = engine;
  const trackerOf = () =>
    typeof by === 'function'
      ? resolveTracker(() => deadlines.bound(by(context), () => plan.policies[group.indexes[0]].describe('by')), context, caller, ips)
      : builtInTracker(by, group, input);
  if (group.fixed === undefined && overrides.active && group.indexes.some((i) => overrides.has(plan.policies[i].compiled.name))) {
    // An override may replace a limit or window function: the tracker comes first, to know whether to call it.
    const tracker = await trackerOf();
    const known = trackers.get(tracker);
    const requests = await Promise.all(
      group.indexes.map((i) => {
        const policy = plan.policies[i];
        return policy.request(context, deadlines, engine.store, overrides.matchFor(known, policy.compiled.name, tracker));
      }),
    );
    return { group, tracker, requests, result: await engine.decide(known.keys, requests, 'consume', criticality) };
  }
  const [tracker, resolved] = await Promise.all([
    trackerOf(),
    group.fixed?.requests ?? Promise.all(group.indexes.map((i) => plan.policies[i].request(context, deadlines, engine.store))),
  ]);
  const known = trackers.get(tracker);
  const requests = group.fixed !== undefined && overrides.active ? overrides.apply(resolved, tracker, known) : resolved;
  return { group, tracker, requests, result: await engine.decide(known.keys, requests, 'consume', criticality) };
}

/**
 * Gives back what the allowing groups took when the request as a whole is not going ahead, so it costs
 * nothing. Only what the store {@link charged} is given back: not a shadow policy that would have rejected,
 * nor a fallback's answer that took nothing (giving that back would erase a real count).
 */
async function refundCharged(results: GroupResult[], engine: RateLimitEngine): Promise<void> {
  const allowing = results.filter(({ result }) => result.allowed);
  await Promise.all(
    allowing.map(({ result }) => {
      const calls = result.calls.filter((call, i) => charged(result.decisions[i], call));
      return calls.length > 0 ? engine.refund(calls) : undefined;
    }),
  );
  for (const { result, requests } of allowing) {
    result.decisions = result.decisions.map((d, i) =>
      d.allowed ? { ...d, remaining: Math.min(d.remaining + requests[i].cost, d.limit) } : d,
    );
  }
}

function assemble(results: GroupResult[], allowed: boolean, plan: RoutePlan): RouteOutcome {
  const size = plan.policies.length;
  const decisions = new Array<RateLimitDecision>(size);
  const calls = new Array<RateLimitCall>(size);
  const members = new Array<string>(size);
  const trackers = new Array<string>(size);
  const nowMs = new Array<number>(size);
  for (const { group, tracker, requests, result } of results) {
    for (let i = 0; i < group.indexes.length; i++) {
      const policyIndex = group.indexes[i];
      decisions[policyIndex] = result.decisions[i];
      calls[policyIndex] = result.calls[i];
      members[policyIndex] = plan.policies[policyIndex].member(requests[i].params);
      trackers[policyIndex] = tracker;
      nowMs[policyIndex] = decidedAt(result, i);
    }
  }
  return { allowed, decisions, calls, policyHeader: members.join(', '), trackers, nowMs };
}
