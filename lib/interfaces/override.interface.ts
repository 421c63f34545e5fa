import type { Duration } from './policy.interface';

/**
 * A runtime override of a policy's numbers for some trackers (`RateLimitAdmin.setOverride`): a customer's plan,
 * an incident's clamp, an abusive client's cut, changed while the fleet runs. Fields left out keep the policy's.
 * @example { limit: 5 } // 5 per window instead of the policy's limit
 * @example { limit: 100, window: '1m', burst: 20 } // a token bucket's rate and capacity
 */
export interface RateLimitOverride {
  /** Requests per window (concurrency: simultaneous leases): a whole number ≥ 1. */
  limit?: number;
  /**
   * The window (concurrency: the lease TTL). Not on a calendar window, whose periods the calendar sets. A
   * `fixed-window` whose window changes starts a new window (see docs/overrides.md, "What is counted carries over").
   */
  window?: Duration;
  /**
   * Capacity of `token-bucket`, `gcra` and `leaky-bucket` (the others have none): a whole number ≥ 1. Left out,
   * it is the policy's `burst`, or else the (overridden) limit, as for the policy itself.
   */
  burst?: number;
}

/** When an override ends (`RateLimitAdmin.setOverride`'s `options`). */
export interface RateLimitOverrideOptions {
  /**
   * When the override ends, on the store's clock (Redis `TIME`): a `Date`, or ms since the epoch. Absent: it
   * lasts until removed.
   */
  until?: Date | number;
}

/** One override in force, as `RateLimitAdmin.listOverrides` lists it. */
export interface RateLimitOverrideEntry {
  /** The policy's `name`. */
  policy: string;
  /** The tracker pattern as it was set: `'acme'`, `'ip:203.0.113.7'`, `'gold-*'` or `'*'`. */
  tracker: string;
  override: RateLimitOverride;
  /** When it ends, ms since the epoch on the store's clock; absent when it lasts until removed. */
  until?: number;
}

/**
 * What {@link RateLimitHooks.override} receives: a change this instance applied to the overrides it enforces.
 * `applied` (set, or changed), `removed` (by `removeOverride`), `expired` (its `until` passed). Every instance
 * reports the changes it applies, so with N instances one `setOverride` is reported N times; `local` tells the
 * instance whose own call made the change.
 */
export interface RateLimitOverrideEvent extends RateLimitOverrideEntry {
  action: 'applied' | 'removed' | 'expired';
  /** True on the instance whose `setOverride` / `removeOverride` made the change. */
  local: boolean;
}
