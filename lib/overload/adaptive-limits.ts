import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitHooks } from '../interfaces/module-options.interface';
import { DEFAULT_NEAR_LIMIT_RATIO, isNearLimit } from '../pipeline/rate-limit.engine';
import type { AdaptiveLimiter } from './adaptive-limiter';

/** One adaptive limit in use: its policy's name, where it applies, and its limiter. */
export interface AdaptiveLimitInUse {
  policy: string;
  /** `<Controller>.<handler>` of a route, or `RateLimiterService.admit`. */
  route: string;
  limiter: AdaptiveLimiter;
}

/** Where `RateLimiterService.admit`'s limits apply, as {@link AdaptiveLimitInUse.route} names it. */
export const ADMIT_ROUTE = 'RateLimiterService.admit';

/**
 * Every adaptive limit of one module (each route's, one per route and policy, and `RateLimiterService.admit`'s,
 * one per policy name), for the gauges of the metrics integrations; and the bus their decisions are told on,
 * as the engine tells the store's: the `decision` hook (one event per admission, apart from the store's
 * decision of the same call) and the `nearLimit` hook.
 */
export class RateLimitAdaptiveLimits {
  private readonly limits: AdaptiveLimitInUse[] = [];

  /**
   * @param hooks the module's event bus (`RateLimitEvents.hooks`, whose hooks are set only while listened to)
   * @param nearLimitRatio the module's `nearLimitRatio`
   */
  constructor(
    private readonly hooks: RateLimitHooks = {},
    private readonly nearLimitRatio = DEFAULT_NEAR_LIMIT_RATIO,
  ) {}

  add(limit: AdaptiveLimitInUse): void {
    this.limits.push(limit);
  }

  /** Every adaptive limit built so far (every route's once the app has bootstrapped). */
  get all(): readonly AdaptiveLimitInUse[] {
    return this.limits;
  }

  /** When an admission starts: `performance.now()` while someone listens to decisions, else 0 (no clock read). */
  started(): number {
    return this.hooks.decision ? performance.now() : 0;
  }

  /** Tells the decision and near-limit hooks, when there are any, of an admission begun at `started`. */
  report(allowed: boolean, decisions: readonly RateLimitDecision[], started: number): void {
    const { decision, nearLimit } = this.hooks;
    if (decision) decision({ allowed, decisions: [...decisions], durationMs: performance.now() - started });
    if (nearLimit) for (const d of decisions) if (isNearLimit(d, this.nearLimitRatio)) nearLimit(d);
  }
}
