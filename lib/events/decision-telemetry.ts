import { mostRestrictive } from '../http/rate-limit-headers';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitDecisionEvent } from '../interfaces/module-options.interface';

/**
 * How a decision came about, for metrics and traces (a small fixed set, so it is safe as an attribute):
 * - `allowed` / `rejected`: the policy's own counter (or its lockout) decided;
 * - `shadow-rejected`: a shadow policy would have rejected; the request went through;
 * - `fail-open` / `fail-closed`: the store failed and `onStoreError` let the request through / rejected it;
 * - `insurance-allowed` / `insurance-rejected`: the store failed and the in-process insurance store decided
 *   (it decides both ways, so one value each keeps "every rejection" a single filter); an `insurance-rejected`
 *   request was answered as any 429, so this outcome is what tells it was the fallback's.
 */
export type RateLimitOutcome =
  'allowed' | 'rejected' | 'shadow-rejected' | 'fail-open' | 'fail-closed' | 'insurance-allowed' | 'insurance-rejected';

/** What decided a request, in one policy: its outcome and that policy's decision. */
export interface RateLimitVerdict {
  outcome: RateLimitOutcome;
  decision: RateLimitDecision;
}

/**
 * Buckets, in seconds, of the decision-latency histograms: sub-millisecond (memory store) to the default
 * 100 ms store deadline and beyond.
 */
export const DECISION_DURATION_BUCKETS: readonly number[] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

/** The outcome of the `index`-th policy of a decision event. */
export function policyOutcome(event: RateLimitDecisionEvent, index: number): RateLimitOutcome {
  const d = event.decisions[index];
  if (d.reason === 'shadow') return 'shadow-rejected';
  if (d.reason !== 'store-unavailable') return d.allowed ? 'allowed' : 'rejected';
  if (event.fallbacks?.[index] === 'insurance') return d.allowed ? 'insurance-allowed' : 'insurance-rejected';
  return d.allowed ? 'fail-open' : 'fail-closed';
}

/**
 * The policy that decided the request and its outcome. Rejected: the enforced rejection with the longest
 * wait. Allowed: a policy a fallback decided if any (the first), else the shadow rejection with the longest
 * wait if any, else the policy with the fewest units left — the same choice as the legacy headers.
 */
export function requestVerdict(event: RateLimitDecisionEvent): RateLimitVerdict {
  const { decisions } = event;
  if (decisions.length === 1) return { outcome: policyOutcome(event, 0), decision: decisions[0] };
  const decision = mostRestrictive(deciding(event));
  return { outcome: policyOutcome(event, decisions.indexOf(decision)), decision };
}

/** The decisions {@link requestVerdict} chooses among (never empty). */
function deciding({ allowed, decisions }: RateLimitDecisionEvent): RateLimitDecision[] {
  if (!allowed) {
    const rejecting = decisions.filter((d) => !d.allowed && d.reason !== 'shadow');
    return rejecting.length > 0 ? rejecting : decisions;
  }
  const fallback = decisions.find((d) => d.reason === 'store-unavailable');
  if (fallback) return [fallback];
  const shadow = decisions.filter((d) => d.reason === 'shadow');
  return shadow.length > 0 ? shadow : decisions;
}
