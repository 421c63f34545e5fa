/**
 * Integer arithmetic shared by the bucket algorithms (token-bucket, gcra, leaky-bucket), mirrored by their
 * Lua fragments. Quantities are scaled by the window so that refill and leak never lose a fraction:
 * one unit is worth `windowMs` scaled units, and `limit` scaled units refill (or leak) per millisecond.
 * `debt` is how far the bucket is from full (0 = full, `burst × windowMs` = empty).
 */
import { ceilDiv } from '../shared/math';
import type { AlgorithmParams, AlgorithmRefund, AlgorithmVerdict } from './algorithm.interface';

/** The decision a bucket in debt `debt` (scaled units) gives a request of `cost` units. */
export interface BucketVerdict {
  allowed: boolean;
  remaining: number;
  resetMs: number;
  retryAfterMs: number;
  /** Ms until the next whole unit refills (leaks): `remaining` grows by one; 0 when the bucket is full. */
  moreQuotaMs: number;
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
      moreQuotaMs: nextUnitMs(after, capacity, limit, windowMs),
      debt: after,
    };
  }
  return {
    allowed: false,
    remaining: Math.floor((capacity - debt) / windowMs),
    resetMs: ceilDiv(debt, limit),
    retryAfterMs: ceilDiv(debt + need - capacity, limit),
    moreQuotaMs: nextUnitMs(debt, capacity, limit, windowMs),
    debt,
  };
}

/**
 * Ms until the level `capacity - debt` (scaled) reaches its next multiple of `windowMs` (one more whole
 * unit), refilling `limit` per ms; 0 at full. A level below zero (a penalty, an overdraft) reports 0 units
 * until it is back to one whole unit, so that is when `remaining` next grows.
 */
function nextUnitMs(debt: number, capacity: number, limit: number, windowMs: number): number {
  if (debt <= 0) return 0;
  const level = capacity - debt;
  return ceilDiv(level < 0 ? windowMs - level : windowMs - (level % windowMs), limit);
}

/**
 * The algorithm verdict for a bucket verdict. One object literal on purpose: spreading `v` into a new object
 * hit a slow path in V8 that made these twins ~50× slower than the others.
 */
export function toVerdict<S>(
  v: BucketVerdict,
  delayMs: number,
  stored: AlgorithmRefund<S>,
  rewrite?: AlgorithmRefund<S>,
): AlgorithmVerdict<S> {
  return {
    allowed: v.allowed,
    remaining: v.remaining,
    resetMs: v.resetMs,
    retryAfterMs: v.retryAfterMs,
    delayMs,
    moreQuotaMs: v.moreQuotaMs,
    next: stored.next,
    ttlMs: stored.ttlMs,
    rewrite,
  };
}

/** What a rejected request stores: nothing. */
export const NOTHING_STORED: AlgorithmRefund<never> = { next: undefined, ttlMs: 0 };
