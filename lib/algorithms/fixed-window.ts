import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CalendarPeriods } from './calendar-periods';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';
import { chargedAt } from './charged-at';

/** Window id (for a calendar window, its period's start in ms) and units counted in it. */
export interface FixedWindowState {
  w: number;
  n: number;
}

/**
 * `fixed-window`: at most `limit` units per aligned window `floor(now / window)`. Cheapest and easiest to
 * explain; a client can spend up to 2×limit across a window boundary. With a calendar window
 * (`params.periods`), the window is the calendar period holding now.
 */
@Injectable()
export class FixedWindowAlgorithm implements RateLimitAlgorithm<FixedWindowState> {
  readonly name = 'fixed-window';
  readonly id = 1;
  readonly keyTag = 'fw';
  readonly redisType = 'string';
  readonly usesBurst = false;
  readonly lua = readFileSync(join(__dirname, 'fixed-window.lua'), 'utf8');

  check(
    state: FixedWindowState | undefined,
    { limit, windowMs, periods }: AlgorithmParams,
    cost: number,
    now: number,
  ): AlgorithmVerdict<FixedWindowState> {
    const id = windowId(windowMs, periods, now);
    const n = state?.w === id ? state.n : 0;
    const ends = windowEnd(windowMs, periods, id) - now;
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

  refund(state: FixedWindowState | undefined, { windowMs, periods }: AlgorithmParams, cost: number, now: number, token: string) {
    const id = windowId(windowMs, periods, now);
    const n = state?.w === id ? state.n : 0;
    // A negative cost is a penalty: it may open the window's count. Units charged in an earlier window
    // (a settlement says when, see chargedAt) ended with it: giving them back would make quota in this one.
    const at = chargedAt(token);
    if (cost >= 0 && (state?.w !== id || (at !== undefined && at < (periods === undefined ? id * windowMs : id)))) return undefined;
    return { next: { w: id, n: Math.max(n - cost, 0) }, ttlMs: windowEnd(windowMs, periods, id) - now };
  }
}

/**
 * The id of the window holding `now`: `floor(now / window)`, or for a calendar window the start of the
 * period holding it (as fixed-window.lua's check).
 */
function windowId(windowMs: number, periods: CalendarPeriods | undefined, now: number): number {
  return periods === undefined ? Math.floor(now / windowMs) : periods.startAt(now);
}

/** When window `id` ends, in ms. */
function windowEnd(windowMs: number, periods: CalendarPeriods | undefined, id: number): number {
  return periods === undefined ? (id + 1) * windowMs : periods.endOf(id);
}
