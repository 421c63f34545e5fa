import type { AlgorithmParams } from '../algorithms/algorithm.interface';
import type { RateLimitDecision, RateLimitDecisionReason } from '../interfaces/decision.interface';
import type { CompiledPolicy } from '../policy/compile-policy';
import type { RateLimitCall, StoreVerdict } from '../stores/store.interface';
import { Verdict } from '../stores/verdicts';

/** One policy's request as a decision reports it (a `PolicyRequest`'s shape; the engine's type is defined above this file). */
interface DecidedRequest {
  compiled: CompiledPolicy;
  params: AlgorithmParams;
}

/**
 * The public reason of each verdict: none when the counter decided, either way; a deny is reported as a
 * lockout. (`'shadow'` is the engine's own, for a shadow policy's rejection.)
 */
const PUBLIC_REASON: Readonly<Record<Verdict, RateLimitDecisionReason | undefined>> = {
  [Verdict.Allowed]: undefined,
  [Verdict.Limited]: undefined,
  [Verdict.Blocked]: 'blocked',
  [Verdict.CostExceedsCapacity]: 'cost-exceeds-capacity',
  [Verdict.StoreUnavailable]: 'store-unavailable',
  [Verdict.Denied]: 'blocked',
  [Verdict.Reserved]: 'reserved',
};

/**
 * Maps one store verdict to the public decision shape. (When nothing was charged, the store already
 * reports allowed policies' quota as it stands.)
 */
export function toDecision({ compiled, params }: DecidedRequest, v: Omit<StoreVerdict, 'reason'>, reason: Verdict): RateLimitDecision {
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
  const shown = PUBLIC_REASON[reason];
  if (shown) decision.reason = shown;
  return decision;
}

/**
 * Whether `decision` is the `fail-closed` fallback's rejection: the store failed and the policy rejects
 * without it, which the guard answers with a 503 (the limiter, not the client, is at fault). An `insurance`
 * rejection also has `reason: 'store-unavailable'` but is not one: the in-process twin counted the client
 * past its limit, so it is answered as any other 429, with its own `Retry-After`.
 */
export function failedClosed(decision: RateLimitDecision, call: RateLimitCall): boolean {
  return !decision.allowed && decision.reason === 'store-unavailable' && call.fallback === 'fail-closed';
}
