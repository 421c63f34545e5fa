import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitHeaderProfileName } from '../interfaces/module-options.interface';
import type { RateLimitAlgorithmName } from '../interfaces/policy.interface';
import { ceilDiv } from '../shared/math';

/** What a profile reads of the policy behind a decision, as the store call that decided it holds it. */
export interface DecidedPolicy {
  algorithm: { name: RateLimitAlgorithmName };
  /** Units the request took (or asked for). */
  cost: number;
  /** `limit` units per `windowMs`: a bucket refills (leaks) one unit every `windowMs / limit` ms. */
  params: { limit: number; windowMs: number };
}

/**
 * How one draft of draft-ietf-httpapi-ratelimit-headers writes the `RateLimit` field: the wire syntax of
 * its list members and what their parameters mean. `RateLimit-Policy` and the legacy headers are the same
 * under every profile. A later draft is one more profile here (and its name in
 * `RATE_LIMIT_HEADER_PROFILES`), nothing else.
 */
export interface RateLimitHeaderProfile {
  readonly name: RateLimitHeaderProfileName;
  /** One decision's `RateLimit` list member. */
  quotaMember(decision: RateLimitDecision, policy: DecidedPolicy): string;
  /**
   * Whether the `RateLimit` of a rejected call lists only the policies that rejected it (the others may be
   * left out, and theirs are windows that can end long after `Retry-After`).
   */
  readonly violatedOnly: boolean;
}

/** Whole seconds (rounded up) of a duration in ms; 0 for none. */
function seconds(ms: number): number {
  return ceilDiv(Math.max(Math.ceil(ms), 0), 1000);
}

/**
 * Whole seconds (rounded up) until additional quota is made available (draft-10's `t`): when `remaining`
 * next grows, not when the quota is fully restored. The same on a rejection: `t` describes the quota beside
 * `r`, while the wait of this request (which may need more than one unit) is `Retry-After`. 0 when nothing
 * is used.
 */
export function secondsUntilMore(decision: RateLimitDecision): number {
  return seconds(decision.moreQuotaMs);
}

/**
 * draft-11's effective window of `r`, in ms: the time within which the `remaining` units the client is told of
 * are always admitted, however it spreads them (a bucket may admit more as it refills meanwhile); `undefined` for `concurrency`, whose quota is not spent over time. Never
 * beyond a rejected decision's own wait, so a 429's `t` never outlasts its `Retry-After`.
 */
export function effectiveWindowMs(decision: RateLimitDecision, policy: DecidedPolicy): number | undefined {
  const ms = windowOfRemaining(decision, policy);
  if (ms === undefined || decision.allowed || !Number.isFinite(decision.retryAfterMs)) return ms;
  return Math.min(ms, decision.retryAfterMs);
}

function windowOfRemaining(d: RateLimitDecision, { algorithm, cost, params }: DecidedPolicy): number | undefined {
  switch (algorithm.name) {
    case 'concurrency':
      return undefined;
    // Units come back all at once, at the window's (calendar period's) end: until then, `r` is all there is.
    case 'fixed-window':
      return d.resetMs;
    // Nothing comes back before the oldest counted unit (of the estimate) leaves the window.
    case 'sliding-log':
    case 'sliding-window':
      return d.moreQuotaMs;
    // token-bucket, gcra, leaky-bucket: `r` is spread over the time the bucket takes to be full (empty)
    // again; when `r` is below the request's cost, the window is until such a request fits.
    default:
      if (!d.allowed) return Number.isFinite(d.retryAfterMs) ? d.retryAfterMs : d.resetMs;
      if (d.remaining >= cost) return d.resetMs;
      return d.moreQuotaMs + ((cost - d.remaining - 1) * params.windowMs) / params.limit;
  }
}

/** draft-ietf-httpapi-ratelimit-headers-10: `t` is when more quota comes; every policy is listed. */
const DRAFT_10: RateLimitHeaderProfile = {
  name: 'draft-10',
  quotaMember: (d) => `"${d.policy}";r=${d.remaining};t=${secondsUntilMore(d)}`,
  violatedOnly: false,
};

/**
 * draft-ietf-httpapi-ratelimit-headers-11: `r` is the available quota and `t` its effective window (§4.1),
 * with no `t` for `concurrency`; a rejection lists the policies it violated, so that `Retry-After` is not
 * earlier than the end of any effective window it sits beside (§6).
 */
const DRAFT_11: RateLimitHeaderProfile = {
  name: 'draft-11',
  quotaMember(d, policy) {
    const ms = effectiveWindowMs(d, policy);
    return ms === undefined ? `"${d.policy}";r=${d.remaining}` : `"${d.policy}";r=${d.remaining};t=${seconds(ms)}`;
  },
  violatedOnly: true,
};

const PROFILES: Readonly<Record<RateLimitHeaderProfileName, RateLimitHeaderProfile>> = {
  'draft-11': DRAFT_11,
  'draft-10': DRAFT_10,
};

/** The profile module option `headerProfile` names (validated at bootstrap). */
export function headerProfile(name: RateLimitHeaderProfileName = 'draft-11'): RateLimitHeaderProfile {
  return PROFILES[name];
}
