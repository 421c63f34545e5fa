/**
 * Integer arithmetic shared by the bucket algorithms (token-bucket, gcra, leaky-bucket), mirrored by their
 * Lua fragments. Quantities are scaled by the window so that refill and leak never lose a fraction:
 * one unit is worth `windowMs` scaled units, and `limit` scaled units refill (or leak) per millisecond.
 * `debt` is how far the bucket is from full (0 = full, `burst × windowMs` = empty).
 */
import { ceilDiv } from '../utils/math';
import type { AlgorithmParams } from './algorithm.interface';

/** The decision a bucket in debt `debt` (scaled units) gives a request of `cost` units. */
export interface BucketVerdict {
  allowed: boolean;
  remaining: number;
  resetMs: number;
  retryAfterMs: number;
  /** Debt after the request, when allowed. */
  debt: number;
}

/** Decides a request against a bucket whose current debt (after refill) is `debt`. */
export function decideBucket(debt: number, { limit, windowMs, burst }: AlgorithmParams, cost: number): BucketVerdict {
  const capacity = burst * windowMs;
  const need = cost * windowMs;
  if (debt + need <= capacity) {
    const after = debt + need;
    return {
      allowed: true,
      remaining: Math.floor((capacity - after) / windowMs),
      resetMs: ceilDiv(after, limit),
      retryAfterMs: 0,
      debt: after,
    };
  }
  return {
    allowed: false,
    remaining: Math.floor((capacity - debt) / windowMs),
    resetMs: ceilDiv(debt, limit),
    retryAfterMs: ceilDiv(debt + need - capacity, limit),
    debt,
  };
}
