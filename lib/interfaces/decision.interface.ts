/** The outcome of one policy for one request. Field names are part of the public contract. */
export interface RateLimitDecision {
  /** Whether the request may proceed. */
  allowed: boolean;
  /** The policy's name. */
  policy: string;
  /** The limit, or the burst capacity for bucket algorithms. */
  limit: number;
  /** Whole units left after this decision, ≥ 0. */
  remaining: number;
  /** Milliseconds until the quota is fully restored. */
  resetMs: number;
  /**
   * Milliseconds until additional quota is made available — the draft's `t` (the `RateLimit` header): the
   * soonest time `remaining` grows by at least one unit if nothing else happens. `0` when nothing is used
   * (the quota is full: nothing more can come). Also set on a rejection (when more quota comes, which for a
   * request of cost 1 is its `retryAfterMs`); during a lockout, no sooner than the lockout ends.
   */
  moreQuotaMs: number;
  /**
   * `0` when allowed; when rejected, milliseconds until this same request would be allowed if nothing else
   * happened. `Infinity` when it can never be allowed (its cost exceeds the capacity).
   */
  retryAfterMs: number;
  /** `leaky-bucket` shaping: how long the caller holds the request before proceeding. */
  delayMs?: number;
  /** Set when the decision did not come from the policy's own counter. */
  reason?: RateLimitDecisionReason;
}

/**
 * Why a decision is what it is, when that is not the plain counter:
 * - `blocked`: a lockout (`blockFor`, or `block()`) is in force;
 * - `cost-exceeds-capacity`: the cost can never fit the policy's capacity;
 * - `store-unavailable`: the store failed and `onStoreError` decided: `fail-open` allowed, `fail-closed`
 *   rejected (HTTP 503), or the in-process `insurance` twin decided either way (its rejection is a 429 with its
 *   own `retryAfterMs`);
 * - `shadow`: the policy would have rejected but runs in shadow mode;
 * - `reserved`: the request would fit the counter, but not without taking the share the policy's `reserve`
 *   keeps for more critical requests (HTTP 503, `temporary-reduced-capacity`); `retryAfterMs` is when it fits
 *   with that share kept.
 */
export type RateLimitDecisionReason = 'blocked' | 'cost-exceeds-capacity' | 'store-unavailable' | 'shadow' | 'reserved';
