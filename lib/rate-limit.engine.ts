import { randomUUID } from 'node:crypto';
import type { AlgorithmParams } from './algorithms/algorithm.interface';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision, StoreVerdict } from './stores/store.interface';
import type { CompiledPolicy } from './utils/compile-policy';
import { StringMemo } from './utils/string-memo';

/** One policy of a decision, with its per-request values resolved. */
export interface PolicyRequest {
  compiled: CompiledPolicy;
  params: AlgorithmParams;
  cost: number;
  /** Lease id (`concurrency`); generated when absent. */
  token?: string;
}

/** The outcome of every policy of one request. */
export interface EngineDecision {
  /** True when every enforced policy allowed (shadow policies never reject). */
  allowed: boolean;
  /** One per request, in order. */
  decisions: RateLimitDecision[];
  /** The calls as sent to the store, in order, to refund or release them later. */
  calls: RateLimitCall[];
}

/** The engine's share of the module options. */
export type RateLimitEngineOptions = Pick<RateLimitModuleOptions, 'mode' | 'onStoreError' | 'hooks'>;

const REASONS = [undefined, 'blocked', 'cost-exceeds-capacity', 'store-unavailable'] as const;

/** The engine's memos are keyed by strings the library built (see {@link RateLimitEngine}): nothing to copy. */
const OWN_KEYS = { ownKeys: true } as const;

/**
 * Turns compiled policies plus a tracker into store calls, and store verdicts into public decisions.
 * Enforced policies are decided in one atomic store call (all or nothing); shadow policies in a second,
 * concurrent one, so a shadow rejection never stops an enforced policy from being charged.
 */
export class RateLimitEngine {
  /**
   * Each recent tracker's keys, by key suffix: the same strings every request (see {@link StringMemo}). Both
   * levels are keyed by strings the library built, never by what a client sent: tracker prefixes (at most
   * the module prefix plus 164 characters: long trackers are hashed) and the policies' key suffixes.
   */
  private readonly keys = new StringMemo(
    (trackerPrefix) => new StringMemo((suffix) => trackerPrefix + suffix, undefined, OWN_KEYS),
    undefined,
    OWN_KEYS,
  );

  constructor(
    readonly store: RateLimitStore,
    private readonly options: RateLimitEngineOptions = {},
  ) {}

  /** Store calls for `requests`, all under one tracker (one hash tag). */
  calls(trackerPrefix: string, requests: readonly PolicyRequest[]): RateLimitCall[] {
    const keys = this.keys.get(trackerPrefix);
    return requests.map(({ compiled, params, cost, token }) => ({
      algorithm: compiled.algorithm,
      params,
      cost,
      blockForMs: compiled.blockForMs,
      stateKey: keys.get(compiled.stateKeySuffix),
      blockKey: keys.get(compiled.blockKeySuffix),
      token: compiled.algorithm.name === 'concurrency' ? (token ?? randomUUID()) : '',
      fallback: compiled.policy.onStoreError ?? this.options.onStoreError ?? 'fail-open',
      refundable: compiled.policy.countOnly !== undefined,
    }));
  }

  async decide(trackerPrefix: string, requests: readonly PolicyRequest[], mode: DecisionMode): Promise<EngineDecision> {
    return this.decideNowOrLater(trackerPrefix, requests, mode);
  }

  /**
   * {@link decide}, answered synchronously when the store decides in-process (the memory store), so the
   * guard's hot path makes no promise at all; a promise otherwise.
   */
  decideNowOrLater(
    trackerPrefix: string,
    requests: readonly PolicyRequest[],
    mode: DecisionMode,
  ): EngineDecision | Promise<EngineDecision> {
    const started = this.options.hooks?.decision ? performance.now() : 0;
    const calls = this.calls(trackerPrefix, requests);
    if (this.anyShadow(requests)) {
      return this.decideSplit(requests, calls, mode).then((result) => this.reported(result, started));
    }
    const answer = this.ask(calls, mode);
    if (answer instanceof Promise) return answer.then((result) => this.reported(this.toEngineDecision(requests, calls, result), started));
    return this.reported(this.toEngineDecision(requests, calls, answer), started);
  }

  /** The store's answer: synchronous when it has one in-process ({@link RateLimitStore.decideSync}), else a promise. */
  private ask(calls: RateLimitCall[], mode: DecisionMode): StoreDecision | Promise<StoreDecision> {
    return this.store.decideSync?.(calls, mode) ?? this.store.decide(calls, mode);
  }

  /** Gives back the cost of `calls` (count-only outcomes), or releases their leases (`concurrency`). */
  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    await this.store.refund(calls);
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
    return { allowed: enforced?.allowed ?? true, decisions, calls };
  }

  /** Tells the decision hook, when there is one, and passes the result on. */
  private reported(result: EngineDecision, started: number): EngineDecision {
    this.options.hooks?.decision?.({ allowed: result.allowed, decisions: result.decisions, durationMs: performance.now() - started });
    return result;
  }

  private toEngineDecision(requests: readonly PolicyRequest[], calls: RateLimitCall[], result: StoreDecision): EngineDecision {
    return { allowed: result.allowed, decisions: this.toDecisions(requests, result.verdicts), calls };
  }

  /** Public decisions for store verdicts, one per request. */
  toDecisions(requests: readonly PolicyRequest[], verdicts: readonly StoreVerdict[]): RateLimitDecision[] {
    return verdicts.map((verdict, i) => toDecision(requests[i], verdict));
  }
}

/**
 * Maps one store verdict to the public decision shape. (When nothing was charged, the store already
 * reports allowed policies' quota as it stands.)
 */
function toDecision({ compiled, params }: PolicyRequest, v: StoreVerdict): RateLimitDecision {
  const decision: RateLimitDecision = {
    allowed: v.allowed,
    policy: compiled.name,
    limit: compiled.algorithm.usesBurst ? params.burst : params.limit,
    remaining: Math.max(v.remaining, 0),
    resetMs: v.resetMs,
    moreQuotaMs: v.moreQuotaMs,
    retryAfterMs: v.allowed ? 0 : v.retryAfterMs < 0 ? Infinity : v.retryAfterMs,
  };
  if (compiled.algorithm.name === 'leaky-bucket' && compiled.policy.delay !== false) decision.delayMs = v.allowed ? v.delayMs : 0;
  const reason = REASONS[v.reason];
  if (reason) decision.reason = reason;
  return decision;
}
