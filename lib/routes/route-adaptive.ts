import type { RateLimitCallOutcome, RateLimitOverload } from '../contexts/rate-limit-context';
import type { DecidedPolicy } from '../http/header-profiles';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitCriticality } from '../interfaces/overload.interface';
import type { AdaptiveLease, AdaptiveLimiter } from '../overload/adaptive-limiter';
import { newAdaptiveLimiter, type CompiledAdaptivePolicy } from '../overload/adaptive-policy';

/** The message of an adaptive limit's 503. */
const OVERLOADED_MESSAGE = 'Service Unavailable: this instance is at its capacity; retry later.';

/** One adaptive policy of a route, with its limiter: one per route in each process. */
export class RouteAdaptivePolicy {
  readonly limiter: AdaptiveLimiter;

  constructor(readonly compiled: CompiledAdaptivePolicy) {
    this.limiter = newAdaptiveLimiter(compiled);
  }
}

/** The header fields and decisions of a call's policies, as the responder writes them. */
export interface HeaderParts {
  policyHeader: string;
  decisions: readonly RateLimitDecision[];
  policies: readonly DecidedPolicy[];
}

/**
 * The adaptive policies' part of one call: a lease from each limiter, or a refusal by one of them. It is
 * decided before the store is asked, so a refusal costs no store call. Its leases are settled once, when the
 * call ends (a measurement) or when another policy refuses the call (none).
 */
export class AdaptiveAdmission {
  private constructor(
    readonly admitted: boolean,
    private readonly leases: readonly AdaptiveLease[],
    readonly decisions: readonly RateLimitDecision[],
    private readonly members: string,
    private readonly retryAfterMs: number,
  ) {}

  /**
   * Admits the call to every limiter of `policies` as `criticality`, or to none: a refusal gives back the
   * leases taken before it.
   */
  static admit(policies: readonly RouteAdaptivePolicy[], criticality: RateLimitCriticality): AdaptiveAdmission {
    const leases: AdaptiveLease[] = [];
    const decisions: RateLimitDecision[] = [];
    const members: string[] = [];
    let refusedBy: AdaptiveLimiter | undefined;
    for (const { compiled, limiter } of policies) {
      // After a refusal the others are not asked: their decisions stay allowing, so only the refusing one is violated.
      const asked = refusedBy === undefined;
      const lease = asked ? limiter.acquire(criticality) : undefined;
      if (lease) leases.push(lease);
      else refusedBy ??= limiter;
      const limit = limiter.strategyLimit;
      members.push(`"${compiled.name}";q=${limit};qu="concurrent-requests"`);
      const retryAfterMs = lease || !asked ? 0 : retryAfterOf(limiter);
      decisions.push({
        allowed: lease !== undefined || !asked,
        policy: compiled.name,
        limit,
        remaining: Math.max(0, limiter.limit - limiter.inflight),
        resetMs: 0,
        moreQuotaMs: 0,
        retryAfterMs,
      });
    }
    if (refusedBy !== undefined) for (const lease of leases) lease.settle('ignored');
    const retryAfterMs = refusedBy === undefined ? 0 : retryAfterOf(refusedBy);
    return new AdaptiveAdmission(
      refusedBy === undefined,
      refusedBy === undefined ? leases : [],
      decisions,
      members.join(', '),
      retryAfterMs,
    );
  }

  /** `parts` with this admission's policies after them. */
  withHeaders(parts: HeaderParts | undefined): HeaderParts {
    // Read as `concurrency` policies are: a quota of requests in flight, with no `t`.
    const own = this.decisions.map((d): DecidedPolicy => ({
      algorithm: { name: 'concurrency' },
      cost: 1,
      params: { limit: d.limit, windowMs: 0 },
    }));
    if (parts === undefined || parts.decisions.length === 0)
      return { policyHeader: this.members, decisions: this.decisions, policies: own };
    return {
      policyHeader: `${parts.policyHeader}, ${this.members}`,
      decisions: [...parts.decisions, ...this.decisions],
      policies: [...parts.policies, ...own],
    };
  }

  /** Another policy refused the call, or it failed before it ran: the leases are given back unmeasured. */
  cancel(): void {
    for (const lease of this.leases) lease.settle('ignored');
  }

  /**
   * The call is over. A response below 400 is a measurement; a 504 (a timeout) is a drop; any other error
   * response, or a client that went away, is ignored: a fast failure or a cancelled call says nothing about
   * the latency of the work.
   */
  end({ statusCode, aborted }: RateLimitCallOutcome): void {
    const outcome = aborted ? 'ignored' : statusCode < 400 ? 'success' : statusCode === 504 ? 'dropped' : 'ignored';
    for (const lease of this.leases) lease.settle(outcome);
  }

  /** What a refused call is told: the 503's message, its `Retry-After` (about one request's RTT) and the decisions. */
  overload(): RateLimitOverload {
    return { message: OVERLOADED_MESSAGE, retryAfter: Math.max(1, Math.ceil(this.retryAfterMs / 1000)), decisions: this.decisions };
  }
}

/** A refused request's wait: about one request's RTT, when a slot should be free again. */
function retryAfterOf(limiter: AdaptiveLimiter): number {
  return Math.max(1, Math.ceil(limiter.recentRttMs));
}
