import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';
import { chargedAt } from './charged-at';

/** Current window id, its count, and the previous window's count. */
export interface SlidingWindowState {
  w: number;
  c: number;
  p: number;
}

/**
 * `sliding-window`: Cloudflare's approximation of a sliding window from two counters; O(1) memory, no
 * boundary burst, slightly generous or strict depending on how traffic was spread in the previous window.
 */
@Injectable()
export class SlidingWindowAlgorithm implements RateLimitAlgorithm<SlidingWindowState> {
  readonly name = 'sliding-window';
  readonly id = 2;
  readonly keyTag = 's';
  readonly redisType = 'string';
  readonly usesBurst = false;
  readonly lua = readFileSync(join(__dirname, 'sliding-window.lua'), 'utf8');

  check(
    state: SlidingWindowState | undefined,
    { limit, windowMs: w }: AlgorithmParams,
    cost: number,
    now: number,
  ): AlgorithmVerdict<SlidingWindowState> {
    const { id, cur, prev } = countsOf(state, w, now);
    const e = now - id * w;
    const used = prev * (w - e) + cur * w;
    if (used + cost * w <= limit * w) {
      const resetMs = resetOf(id, cur + cost, prev, w, now);
      const next = { w: id, c: cur + cost, p: prev };
      const remaining = Math.floor((limit * w - used - cost * w) / w);
      return {
        allowed: true,
        remaining,
        resetMs,
        retryAfterMs: 0,
        delayMs: 0,
        moreQuotaMs: moreOf(id, e, cur + cost, prev, remaining, limit, w, now),
        next,
        ttlMs: resetMs,
      };
    }
    const remaining = Math.floor(Math.max(limit * w - used, 0) / w);
    return {
      allowed: false,
      remaining,
      resetMs: resetOf(id, cur, prev, w, now),
      retryAfterMs: retryOf(id, e, cur, prev, limit, w, cost, now),
      delayMs: 0,
      moreQuotaMs: moreOf(id, e, cur, prev, remaining, limit, w, now),
      next: undefined,
      ttlMs: 0,
    };
  }

  refund(state: SlidingWindowState | undefined, { windowMs }: AlgorithmParams, cost: number, now: number, token: string) {
    const { id, cur, prev } = countsOf(state, windowMs, now);
    const at = chargedAt(token);
    if (cost >= 0 && at !== undefined && Math.floor(at / windowMs) < id) {
      // Charged in an earlier window (a settlement says when): the units weigh through the previous window's
      // count while it overlaps, so they come back from there; from older windows they weigh nothing any more.
      if (Math.floor(at / windowMs) !== id - 1 || prev === 0) return undefined;
      const p = Math.max(prev - cost, 0);
      return { next: { w: id, c: cur, p }, ttlMs: resetOf(id, cur, p, windowMs, now) };
    }
    // A negative cost (a penalty) may open the current window's count.
    if (cur === 0 && cost >= 0) return undefined;
    const c = Math.max(cur - cost, 0);
    return { next: { w: id, c, p: prev }, ttlMs: resetOf(id, Math.max(cur, c), prev, windowMs, now) };
  }
}

function countsOf(state: SlidingWindowState | undefined, w: number, now: number) {
  const id = Math.floor(now / w);
  if (state?.w === id) return { id, cur: state.c, prev: state.p };
  if (state?.w === id - 1) return { id, cur: 0, prev: state.c };
  return { id, cur: 0, prev: 0 };
}

function resetOf(id: number, cur: number, prev: number, w: number, now: number): number {
  if (cur > 0) return (id + 2) * w - now;
  if (prev > 0) return (id + 1) * w - now;
  return 0;
}

/**
 * When floor(remaining) next grows: the earliest time one unit more than `remaining` would fit, i.e. when the
 * weighted count has dropped to (limit − remaining − 1)·W — solved exactly in integers by {@link retryOf},
 * including across the boundary where `cur` becomes `prev`. 0 when nothing is counted.
 */
function moreOf(id: number, e: number, cur: number, prev: number, remaining: number, limit: number, w: number, now: number): number {
  return cur === 0 && prev === 0 ? 0 : retryOf(id, e, cur, prev, limit, w, remaining + 1, now);
}

/** The earliest time the weighted count leaves room: later in this window, or in the next one. */
function retryOf(id: number, e: number, cur: number, prev: number, limit: number, w: number, cost: number, now: number): number {
  const room = (limit - cur - cost) * w;
  if (room >= 0 && prev > 0) {
    const e2 = w - Math.floor(room / prev);
    if (e2 < w) return e2 - e;
  }
  const e2 = cur > 0 ? Math.max(w - Math.floor(((limit - cost) * w) / cur), 0) : 0;
  return (id + 1) * w + e2 - now;
}
