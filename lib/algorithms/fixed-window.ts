import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';

/** Window id and units counted in it. */
export interface FixedWindowState {
  w: number;
  n: number;
}

/**
 * `fixed-window`: at most `limit` units per aligned window `floor(now / window)`. Cheapest and easiest to
 * explain; a client can spend up to 2×limit across a window boundary.
 */
@Injectable()
export class FixedWindowAlgorithm implements RateLimitAlgorithm<FixedWindowState> {
  readonly name = 'fixed-window';
  readonly id = 1;
  readonly keyTag = 'fw';
  readonly redisType = 'hash';
  readonly usesBurst = false;
  readonly lua = readFileSync(join(__dirname, 'fixed-window.lua'), 'utf8');

  check(
    state: FixedWindowState | undefined,
    { limit, windowMs }: AlgorithmParams,
    cost: number,
    now: number,
  ): AlgorithmVerdict<FixedWindowState> {
    const id = Math.floor(now / windowMs);
    const n = state?.w === id ? state.n : 0;
    const ends = (id + 1) * windowMs - now;
    if (n + cost <= limit) {
      const reset = n + cost > 0 ? ends : 0;
      return {
        allowed: true,
        remaining: limit - n - cost,
        resetMs: reset,
        retryAfterMs: 0,
        delayMs: 0,
        // Units come back all at once, at the window's end.
        moreQuotaMs: reset,
        next: { w: id, n: n + cost },
        ttlMs: n + cost > 0 ? ends : 0,
      };
    }
    const resetMs = n > 0 ? ends : 0;
    return {
      allowed: false,
      remaining: limit - n,
      resetMs,
      retryAfterMs: ends,
      delayMs: 0,
      moreQuotaMs: resetMs,
      next: undefined,
      ttlMs: 0,
    };
  }

  refund(state: FixedWindowState | undefined, { windowMs }: AlgorithmParams, cost: number, now: number) {
    const id = Math.floor(now / windowMs);
    const n = state?.w === id ? state.n : 0;
    // A negative cost is a penalty: it may open the window's count.
    if (state?.w !== id && cost >= 0) return undefined;
    return { next: { w: id, n: Math.max(n - cost, 0) }, ttlMs: (id + 1) * windowMs - now };
  }
}
