import type { AlgorithmParams, RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitCriticality } from '../interfaces/overload.interface';
import type { RateLimitPolicy } from '../interfaces/policy.interface';
import { describeValue } from '../shared/describe-value';

/**
 * A policy's `reserve`: per criticality below `'critical'`, the share of the capacity its requests leave
 * untaken, and those units for the policy's fixed capacity, so the usual request only looks them up.
 */
export interface CompiledReserve {
  /** Held back from `'default'` requests (the critical share) and from `'sheddable'` ones (both shares). */
  readonly shares: Readonly<Record<'default' | 'sheddable', number>>;
  /** The capacity {@link units} are for: the fixed `limit`, or `burst` for the bucket algorithms; undefined when not fixed. */
  readonly capacity: number | undefined;
  readonly units: Readonly<Record<'default' | 'sheddable', number>>;
}

/** Validates `reserve` (shares in [0, 1), together below 1) and works out the units it holds for a fixed capacity. */
export function compileReserve(policy: RateLimitPolicy, algorithm: RateLimitAlgorithm, where: string): CompiledReserve | undefined {
  const { reserve } = policy;
  if (reserve === undefined) return undefined;
  const fail = (message: string) => new RateLimitConfigError(`${where}: reserve: ${message}`);
  if (reserve === null || typeof reserve !== 'object' || Array.isArray(reserve)) {
    throw fail(
      `${describeValue(reserve)} must be an object of shares of the capacity, such as { critical: 0.2 } (20 % kept for 'critical' requests) or { critical: 0.2, default: 0.1 }.`,
    );
  }
  for (const field of Object.keys(reserve)) {
    if (field !== 'critical' && field !== 'default') {
      throw fail(
        `unknown field '${field}'; a reserve keeps a share for 'critical' and one for 'default' requests (and those above them): 'sheddable' ones, the least critical, keep none.`,
      );
    }
  }
  const share = (field: 'critical' | 'default'): number => {
    const value: unknown = reserve[field];
    if (value === undefined) return 0;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value >= 1)
      throw fail(`${field}: ${describeValue(value)} must be a share of the capacity from 0 up to, not including, 1 (0.2 keeps 20 %).`);
    return value;
  };
  const critical = share('critical');
  const all = critical + share('default');
  if (all >= 1) {
    throw fail(
      `critical + default is ${+all.toFixed(6)}; together the shares must stay below 1, or no request below 'critical' could ever be admitted.`,
    );
  }
  const burst = algorithm.usesBurst ? policy.burst : undefined;
  const capacity = burst ?? (typeof policy.limit === 'number' ? policy.limit : undefined);
  const shares = { default: critical, sheddable: all };
  const units =
    capacity === undefined ? { default: 0, sheddable: 0 } : { default: heldUnits(critical, capacity), sheddable: heldUnits(all, capacity) };
  return { shares, capacity, units };
}

/**
 * The units a request of `criticality` must leave untaken under a compiled policy's `reserve` with `params` (0 without
 * one, and for `'critical'` requests): looked up for the policy's fixed capacity, worked out for another (a
 * limit function's, a runtime override's).
 */
export function reserveHold(
  { reserve, algorithm }: { reserve: CompiledReserve | undefined; algorithm: RateLimitAlgorithm },
  params: AlgorithmParams,
  criticality: RateLimitCriticality,
): number {
  if (reserve === undefined || criticality === 'critical') return 0;
  const capacity = algorithm.usesBurst ? params.burst : params.limit;
  return capacity === reserve.capacity ? reserve.units[criticality] : heldUnits(reserve.shares[criticality], capacity);
}

/**
 * `share` of `capacity` in whole units: the nearest (so 100 × 0.2 is 20, whatever the float's last digit), at
 * least 1 for a share above 0 (a reserve never vanishes by rounding), and never the whole capacity (which no
 * request below it could ever use).
 */
export function heldUnits(share: number, capacity: number): number {
  if (share === 0) return 0;
  return Math.min(Math.max(Math.round(share * capacity), 1), capacity - 1);
}
