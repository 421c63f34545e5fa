import { randomUUID } from 'node:crypto';
import type { AlgorithmParams } from '../algorithms/algorithm.interface';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitDecisionEvent, RateLimitModuleOptions } from '../interfaces/module-options.interface';
import type { RateLimitCriticality } from '../interfaces/overload.interface';
import { RateLimitDenyList } from './deny-list';
import { RateLimitOverrides } from './override-sync';
import { toDecision } from './public-decision';
import type {
  DecisionMode,
  KeySlot,
  RateLimitCall,
  RateLimitStore,
  StoreDecision,
  StoreFallback,
  StoreVerdict,
} from '../stores/store.interface';
import type { CompiledPolicy } from '../policy/compile-policy';
import { reserveHold } from '../policy/compile-reserve';
import { DENY_KEY_SUFFIX } from '../shared/keys';
import { StringMemo } from '../shared/string-memo';

// Re-exported for the route responder, which imports it from the engine.

/** One policy of a decision, with its per-request values resolved. */
export interface PolicyRequest {
  compiled: CompiledPolicy;
  params: AlgorithmParams;
  cost: number;
  /** Lease id (`concurrency`); generated when absent. */
  token?: string;
  /** Its charge may be settled later (a reservation): as `countOnly` and `settle`, units may come back. */
  settled?: true;
}

/**
 * One tracker's keys by key suffix ({@link newTrackerKeys}): a caller that remembers its trackers keeps this
 * beside them, so a decision finds its keys without looking the tracker up again.
 */
export type TrackerKeys = StringMemo<KeySlot>;

/** The outcome of every policy of one request. */
export interface EngineDecision {
  /** True when every enforced policy allowed (shadow policies never reject). */
  allowed: boolean;
  /** One per request, in order. */
  decisions: RateLimitDecision[];
  /** The calls as sent to the store, in order, to refund or release them later. */
  calls: RateLimitCall[];
  /**
   * The store's time of the decision in ms (its `TIME`), which a settlement names to give units back in the
   * window they were charged in; one per request when shadow policies were decided apart at another time.
   */
  nowMs: number | number[];
}

/** The engine's share of the module options. */
export type RateLimitEngineOptions = Pick<RateLimitModuleOptions, 'mode' | 'onStoreError' | 'hooks' | 'nearLimitRatio' | 'prefix'> & {
  /** Local time in ms for the deny list's ends (see {@link RateLimitDenyList}); monotonic by default. */
  clock?: () => number;
};

/**
 * `onStoreError` when neither the policy nor the module sets one: the in-process insurance twin decides with
 * each limit (`insuranceShare` of it), so an outage or a stall never admits more than the limit per instance.
 * `'fail-open'` (unlimited) and `'fail-closed'` (503) are explicit choices.
 */
const DEFAULT_STORE_FALLBACK: StoreFallback = 'insurance';

/** The engine's memos are keyed by strings the library built (see {@link RateLimitEngine}): nothing to copy. */
const OWN_KEYS = { ownKeys: true } as const;

/**
 * A new holder of the keys of the tracker whose key prefix is `trackerPrefix` (`<prefix>:{<tracker>}:`), for a
 * caller that remembers its trackers itself (the engine remembers them for callers that pass a key prefix).
 */
export function newTrackerKeys(trackerPrefix: string): TrackerKeys {
  return new StringMemo<KeySlot>((suffix) => ({ key: trackerPrefix + suffix, entry: undefined }), undefined, OWN_KEYS);
}

/**
 * Turns compiled policies plus a tracker into store calls, and store verdicts into public decisions.
 * Enforced policies are decided in one atomic store call (all or nothing); shadow policies in a second,
 * concurrent one, so a shadow rejection never stops an enforced policy from being charged.
 */
export class RateLimitEngine {
  /**
   * Each recent tracker's keys, by key suffix, for callers that pass a tracker's key prefix (the guard and the
   * service remember theirs): the same strings every request (see {@link StringMemo}). Both
   * levels are keyed by strings the library built, never by what a client sent: tracker prefixes (at most
   * the module prefix plus 164 characters: long trackers are hashed) and the policies' key suffixes.
   */
  private readonly keys = new StringMemo(newTrackerKeys, undefined, OWN_KEYS);

  /** Denied trackers: kept in the store, and every one in force held here in front of a remote one. */
  readonly denials: RateLimitDenyList;
  /** Runtime overrides of policies' numbers: kept in the store, applied here from a copy (see {@link RateLimitOverrides}). */
  readonly overrides: RateLimitOverrides;

  constructor(
    readonly store: RateLimitStore,
    private readonly options: RateLimitEngineOptions = {},
  ) {
    this.denials = new RateLimitDenyList(store, options.clock);
    this.overrides = new RateLimitOverrides(store, options, this.denials);
  }

  /**
   * Store calls for `requests`, all under one tracker (one hash tag): its key prefix, or its keys. A decision
   * names the request's `criticality`, which a policy's `reserve` holds units back from; without one (a
   * refund, a lockout's keys), nothing is held.
   */
  calls(tracker: string | TrackerKeys, requests: readonly PolicyRequest[], criticality?: RateLimitCriticality): RateLimitCall[] {
    const keys = typeof tracker === 'string' ? this.keys.get(tracker) : tracker;
    const denyKey = keys.get(DENY_KEY_SUFFIX).key;
    return requests.map(({ compiled, params, cost, token, settled }) => {
      const state = keys.get(compiled.stateKeySuffix);
      return {
        algorithm: compiled.algorithm,
        params,
        cost,
        hold: criticality === undefined ? 0 : reserveHold(compiled, params, criticality),
        blockForMs: compiled.blockForMs,
        escalate: compiled.escalate,
        denyKey,
        stateKey: state.key,
        stateSlot: state,
        blockKey: keys.get(compiled.blockKeySuffix).key,
        token: compiled.algorithm.name === 'concurrency' ? (token ?? randomUUID()) : '',
        fallback: compiled.policy.onStoreError ?? this.options.onStoreError ?? DEFAULT_STORE_FALLBACK,
        refundable: settled === true || compiled.policy.countOnly !== undefined || compiled.policy.settle !== undefined,
        slice: compiled.policy.slice ?? 0,
      };
    });
  }

  /** The decision of `requests` for a request of `criticality` (`'default'` when not given), one store call. */
  async decide(
    tracker: string | TrackerKeys,
    requests: readonly PolicyRequest[],
    mode: DecisionMode,
    criticality?: RateLimitCriticality,
  ): Promise<EngineDecision> {
    return this.decideNowOrLater(tracker, requests, mode, criticality);
  }

  /**
   * {@link decide}, answered synchronously when the store decides in-process (the memory store), so the
   * guard's hot path makes no promise at all; a promise otherwise.
   */
  decideNowOrLater(
    tracker: string | TrackerKeys,
    requests: readonly PolicyRequest[],
    mode: DecisionMode,
    criticality: RateLimitCriticality = 'default',
  ): EngineDecision | Promise<EngineDecision> {
    const started = this.options.hooks?.decision ? performance.now() : 0;
    const calls = this.calls(tracker, requests, criticality);
    if (this.anyShadow(requests)) {
      return this.decideSplit(requests, calls, mode).then((result) => this.reported(result, started));
    }
    const answer = this.ask(calls, mode);
    if (answer instanceof Promise) return answer.then((result) => this.reported(this.toEngineDecision(requests, calls, result), started));
    return this.reported(this.toEngineDecision(requests, calls, answer), started);
  }

  /**
   * Whether {@link consumePlain} may answer a consume of `request`: the store answers in-process (see
   * {@link RateLimitStore.consumePlain}), and the policy needs nothing but its counter (no shadow mode, no
   * lockout, no lease, no reserve) nor the decision any hook.
   */
  takesPlain({ compiled }: PolicyRequest): boolean {
    const { hooks } = this.options;
    return (
      this.store.consumePlain !== undefined &&
      hooks?.decision === undefined &&
      hooks?.nearLimit === undefined &&
      compiled.blockForMs === 0 &&
      compiled.algorithm.name !== 'concurrency' &&
      compiled.reserve === undefined &&
      !this.isShadow(compiled)
    );
  }

  /**
   * A consume of one policy that {@link takesPlain}, whose state key is `state`, answered at once by the store
   * with no call, verdicts or engine decision made; `undefined` when the store declines it (a deny or lockout
   * exists): then ask {@link decideNowOrLater}.
   */
  consumePlain(state: KeySlot, request: PolicyRequest): RateLimitDecision | undefined {
    const v = this.store.consumePlain!(state, request.compiled.algorithm, request.params, request.cost);
    return v === undefined ? undefined : toDecision(request, v, v.reason);
  }

  /** The deny-list key of a tracker: its key prefix, or its keys. */
  denyKey(tracker: string | TrackerKeys): string {
    return (typeof tracker === 'string' ? this.keys.get(tracker) : tracker).get(DENY_KEY_SUFFIX).key;
  }

  /**
   * The store's answer: synchronous when it has one in-process ({@link RateLimitStore.decideSync}), else a
   * promise; a tracker this instance knows to be denied is answered before any store call.
   */
  private ask(calls: RateLimitCall[], mode: DecisionMode): StoreDecision | Promise<StoreDecision> {
    return this.denials.answer(calls) ?? this.store.decideSync?.(calls, mode) ?? this.store.decide(calls, mode);
  }

  /**
   * Gives back the cost of `calls` (count-only outcomes), or releases their leases (`concurrency`). Calls of
   * different trackers go in separate store calls: on a Cluster their keys live in different slots.
   */
  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    await Promise.all(byTracker(calls).map((group) => this.store.refund(group)));
  }

  private anyShadow(requests: readonly PolicyRequest[]): boolean {
    for (const request of requests) if (this.isShadow(request.compiled)) return true;
    return false;
  }

  /** Whether a policy only reports (its own `mode` wins over the module's). */
  isShadow(compiled: CompiledPolicy): boolean {
    return compiled.policy.mode === undefined ? this.options.mode === 'shadow' : compiled.shadow;
  }

  private async decideSplit(requests: readonly PolicyRequest[], calls: RateLimitCall[], mode: DecisionMode): Promise<EngineDecision> {
    const shadow = requests.map((r) => this.isShadow(r.compiled));
    const pick = <T>(items: readonly T[], wanted: boolean) => items.filter((_, i) => shadow[i] === wanted);
    const [enforced, shadowed] = await Promise.all(
      [false, true].map(async (wanted) => {
        const part = pick(calls, wanted);
        return part.length === 0 ? undefined : this.toEngineDecision(pick(requests, wanted), part, await this.ask(part, mode));
      }),
    );
    const decisions: RateLimitDecision[] = [];
    let e = 0;
    let s = 0;
    for (const isShadow of shadow) {
      if (!isShadow) decisions.push(enforced!.decisions[e++]);
      else {
        const d = shadowed!.decisions[s++];
        decisions.push(d.allowed ? d : { ...d, reason: 'shadow' });
      }
    }
    const times = [enforced, shadowed].flatMap((part) => (part ? [part.nowMs as number] : []));
    const nowMs = times[0] === times[times.length - 1] ? times[0] : shadow.map((isShadow) => times[isShadow ? 1 : 0]);
    return { allowed: enforced?.allowed ?? true, decisions, calls, nowMs };
  }

  /** Tells the decision and near-limit hooks, when there are any, and passes the result on. */
  private reported(result: EngineDecision, started: number): EngineDecision {
    const hooks = this.options.hooks;
    if (hooks?.decision) hooks.decision(this.decisionEvent(result, started));
    if (hooks?.nearLimit) this.reportNearLimit(result.decisions, hooks.nearLimit);
    return result;
  }

  private decisionEvent({ allowed, decisions, calls }: EngineDecision, started: number): RateLimitDecisionEvent {
    const event: RateLimitDecisionEvent = { allowed, decisions, durationMs: performance.now() - started };
    // Only during an outage, so the usual event stays three fields.
    for (const d of decisions) {
      if (d.reason === 'store-unavailable') {
        event.fallbacks = calls.map((c) => c.fallback);
        break;
      }
    }
    return event;
  }

  /**
   * Each allowed decision with at most `floor(nearLimitRatio × limit)` units left. A fallback's decision is
   * left out: during an outage the client's real quota is unknown (fail-open reports a full one).
   */
  private reportNearLimit(decisions: readonly RateLimitDecision[], nearLimit: (decision: RateLimitDecision) => void): void {
    const ratio = this.options.nearLimitRatio ?? DEFAULT_NEAR_LIMIT_RATIO;
    for (const d of decisions) if (isNearLimit(d, ratio)) nearLimit(d);
  }

  private toEngineDecision(requests: readonly PolicyRequest[], calls: RateLimitCall[], answer: StoreDecision): EngineDecision {
    // Only a rejection can teach a deny; an answer that allowed matters only while some deny is known here.
    const result = !answer.allowed || this.denials.active ? this.denials.review(calls, answer) : answer;
    return { allowed: result.allowed, decisions: this.toDecisions(requests, result.verdicts), calls, nowMs: result.nowMs };
  }

  /** Public decisions for store verdicts, one per request. */
  toDecisions(requests: readonly PolicyRequest[], verdicts: readonly StoreVerdict[]): RateLimitDecision[] {
    return verdicts.map((verdict, i) => toDecision(requests[i], verdict, verdict.reason));
  }
}

/** `calls` grouped by tracker (the hash tag of their keys), in order; one group in the usual case. */
function byTracker(calls: readonly RateLimitCall[]): ReadonlyArray<readonly RateLimitCall[]> {
  const tagOf = (call: RateLimitCall) => call.stateKey.slice(0, call.stateKey.indexOf('}') + 1);
  if (calls.length === 0) return [];
  const first = tagOf(calls[0]);
  if (calls.every((call) => tagOf(call) === first)) return [calls];
  const groups = new Map<string, RateLimitCall[]>();
  for (const call of calls) {
    const tag = tagOf(call);
    const group = groups.get(tag);
    if (group) group.push(call);
    else groups.set(tag, [call]);
  }
  return [...groups.values()];
}

/** `nearLimitRatio`'s default. */
export const DEFAULT_NEAR_LIMIT_RATIO = 0.1;

/**
 * Whether `d` is an allowed decision with at most `floor(ratio × limit)` units left (the `nearLimit` hook). A
 * fallback's decision is not: during an outage the client's real quota is unknown (fail-open reports a full one).
 */
export function isNearLimit(d: RateLimitDecision, ratio: number): boolean {
  // The epsilon keeps 0.29 × 100 at 29 rather than 28.999….
  return d.allowed && d.reason !== 'store-unavailable' && d.remaining <= Math.floor((ratio + 1e-12) * d.limit);
}
