import { randomUUID } from 'node:crypto';
import type { AlgorithmParams } from './algorithms/algorithm.interface';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision, StoreVerdict } from './stores/store.interface';
import type { CompiledPolicy } from './utils/compile-policy';

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
  /** True when every enforced policy allowed. */
  allowed: boolean;
  decisions: RateLimitDecision[];
  /** The calls as sent to the store, to refund or release them later. */
  calls: RateLimitCall[];
}

/** Turns compiled policies plus a tracker into store calls, and store verdicts into public decisions. */
export class RateLimitEngine {
  constructor(readonly store: RateLimitStore) {}

  /** Store calls for `requests`, all under one tracker (one hash tag). */
  calls(trackerPrefix: string, requests: readonly PolicyRequest[]): RateLimitCall[] {
    return requests.map(({ compiled, params, cost, token }) => {
      const base = trackerPrefix + compiled.keySuffix;
      return {
        algorithm: compiled.algorithm,
        params,
        cost,
        blockForMs: compiled.blockForMs,
        stateKey: base + compiled.algorithm.keyTag,
        blockKey: `${base}b`,
        token: compiled.algorithm.name === 'concurrency' ? (token ?? randomUUID()) : '',
      };
    });
  }

  async decide(trackerPrefix: string, requests: readonly PolicyRequest[], mode: DecisionMode): Promise<EngineDecision> {
    const calls = this.calls(trackerPrefix, requests);
    const result = await this.store.decide(calls, mode);
    return { allowed: result.allowed, decisions: toDecisions(requests, result, mode), calls };
  }

  /** Gives back the cost of `calls` (count-only outcomes), or releases their leases (`concurrency`). */
  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    await this.store.refund(calls);
  }
}

/**
 * Maps the store's verdicts to the public decision shape. When another policy rejected the request, the
 * policies that allowed it were not charged, so their `remaining` is given back the request's cost.
 */
export function toDecisions(requests: readonly PolicyRequest[], result: StoreDecision, mode: DecisionMode): RateLimitDecision[] {
  const uncharged = mode === 'peek' || !result.allowed;
  return result.verdicts.map((verdict, i) => toDecision(requests[i], verdict, uncharged));
}

function toDecision({ compiled, params, cost }: PolicyRequest, v: StoreVerdict, uncharged: boolean): RateLimitDecision {
  const decision: RateLimitDecision = {
    allowed: v.allowed,
    policy: compiled.name,
    limit: compiled.algorithm.usesBurst ? params.burst : params.limit,
    remaining: Math.max(v.remaining + (uncharged && v.allowed ? cost : 0), 0),
    resetMs: v.resetMs,
    retryAfterMs: v.allowed ? 0 : v.retryAfterMs < 0 ? Infinity : v.retryAfterMs,
  };
  if (compiled.algorithm.name === 'leaky-bucket' && compiled.policy.delay !== false) decision.delayMs = v.allowed ? v.delayMs : 0;
  if (v.reason === 1) decision.reason = 'blocked';
  else if (v.reason === 2) decision.reason = 'cost-exceeds-capacity';
  return decision;
}
