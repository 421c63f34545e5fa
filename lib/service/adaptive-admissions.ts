import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitAdaptivePolicy, RateLimitAdmission, RateLimitCriticality } from '../interfaces/overload.interface';
import type { AdaptiveLimiter } from '../overload/adaptive-limiter';
import { ADMIT_ROUTE, RateLimitAdaptiveLimits } from '../overload/adaptive-limits';
import { compileAdaptivePolicy, isAdaptivePolicy, newAdaptiveLimiter, type CompiledAdaptivePolicy } from '../overload/adaptive-policy';

/** Most adaptive policies `RateLimiterService.admit` keeps a limiter for (names come from code, not requests). */
const MAX_LIMITERS = 1_000;

const NOTHING_TO_RELEASE = (): void => undefined;

/**
 * The adaptive limits of `RateLimiterService.admit`: one limiter per policy name in this process, built on
 * first use. A name stands for one configuration: using it with another is a configuration error, since the
 * limit it has learned belongs to the work it measured.
 */
export class AdaptiveAdmissions {
  private readonly limiters = new Map<string, { compiled: CompiledAdaptivePolicy; limiter: AdaptiveLimiter }>();

  /** @param limits where each limiter is listed, and each admission told (the module's) */
  constructor(private readonly limits = new RateLimitAdaptiveLimits()) {}

  admit(policy: RateLimitAdaptivePolicy, criticality: RateLimitCriticality = 'default'): RateLimitAdmission {
    const { compiled, limiter } = this.limiterOf(policy);
    const started = this.limits.started();
    const lease = limiter.acquire(criticality);
    const decision = {
      allowed: lease !== undefined,
      policy: compiled.name,
      limit: limiter.strategyLimit,
      remaining: Math.max(0, limiter.limit - limiter.inflight),
      resetMs: 0,
      moreQuotaMs: 0,
      retryAfterMs: lease ? 0 : Math.max(1, Math.ceil(limiter.recentRttMs)),
    };
    this.limits.report(decision.allowed, [decision], started);
    return { decision, release: lease ? (outcome = 'success', rttMs) => lease.settle(outcome, rttMs) : NOTHING_TO_RELEASE };
  }

  private limiterOf(policy: RateLimitAdaptivePolicy): { compiled: CompiledAdaptivePolicy; limiter: AdaptiveLimiter } {
    const where = 'RateLimiterService.admit';
    if (!isAdaptivePolicy(policy)) {
      throw new RateLimitConfigError(
        `${where}: expected a policy with algorithm 'adaptive', such as { algorithm: 'adaptive', limit: 50 }.`,
      );
    }
    const compiled = compileAdaptivePolicy(policy, `${where} (policy '${policy.name ?? 'adaptive'}')`);
    const known = this.limiters.get(compiled.name);
    if (known !== undefined) {
      if (!sameConfiguration(known.compiled, compiled)) {
        throw new RateLimitConfigError(
          `${where}: policy '${compiled.name}' was first used with another configuration; give each adaptive limit its own name.`,
        );
      }
      return known;
    }
    if (this.limiters.size >= MAX_LIMITERS) {
      throw new RateLimitConfigError(
        `${where}: more than ${MAX_LIMITERS} adaptive policy names; name limits after kinds of work, not after requests.`,
      );
    }
    const entry = { compiled, limiter: newAdaptiveLimiter(compiled) };
    this.limiters.set(compiled.name, entry);
    this.limits.add({ policy: compiled.name, route: ADMIT_ROUTE, limiter: entry.limiter });
    return entry;
  }
}

function sameConfiguration(a: CompiledAdaptivePolicy, b: CompiledAdaptivePolicy): boolean {
  return (
    a.limit === b.limit &&
    a.strategy === b.strategy &&
    a.min === b.min &&
    a.initial === b.initial &&
    JSON.stringify(a.partitions ?? null) === JSON.stringify(b.partitions ?? null)
  );
}
