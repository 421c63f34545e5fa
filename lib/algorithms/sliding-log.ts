import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';

/** Times (ms) of the units taken inside the window, oldest first. */
export type SlidingLogState = number[];

/**
 * `sliding-log`: exact sliding window. One entry per unit taken; memory grows with the limit.
 */
@Injectable()
export class SlidingLogAlgorithm implements RateLimitAlgorithm<SlidingLogState> {
  readonly name = 'sliding-log';
  readonly id = 3;
  readonly keyTag = 'sl';
  readonly redisType = 'zset';
  readonly usesBurst = false;
  readonly lua = readFileSync(join(__dirname, 'sliding-log.lua'), 'utf8');

  check(
    state: SlidingLogState | undefined,
    { limit, windowMs }: AlgorithmParams,
    cost: number,
    now: number,
  ): AlgorithmVerdict<SlidingLogState> {
    const log = trim(state, windowMs, now);
    const n = log.length;
    if (n + cost <= limit) {
      const next = cost > 0 ? insert(log, now, cost) : log;
      const resetMs = cost > 0 ? windowMs : n > 0 ? log[n - 1] + windowMs - now : 0;
      const moreQuotaMs = moreOf(next, limit, windowMs, now);
      return { allowed: true, remaining: limit - n - cost, resetMs, retryAfterMs: 0, delayMs: 0, moreQuotaMs, next, ttlMs: resetMs };
    }
    const need = n + cost - limit;
    return {
      allowed: false,
      remaining: Math.max(limit - n, 0),
      resetMs: n > 0 ? log[n - 1] + windowMs - now : 0,
      retryAfterMs: need <= n ? log[need - 1] + windowMs - now : 0,
      delayMs: 0,
      moreQuotaMs: moreOf(log, limit, windowMs, now),
      next: undefined,
      ttlMs: 0,
    };
  }

  refund(state: SlidingLogState | undefined, { windowMs }: AlgorithmParams, cost: number, now: number) {
    const log = trim(state, windowMs, now);
    // A negative cost is a penalty: log that many units now, as an admitted request would.
    if (cost < 0) return { next: insert(log, now, -cost), ttlMs: windowMs };
    if (log.length === 0) return undefined;
    const next = log.slice(0, Math.max(log.length - cost, 0));
    return { next, ttlMs: next.length > 0 ? next[next.length - 1] + windowMs - now : 0 };
  }
}

/**
 * When `remaining` next grows: the oldest entry ages out — or, in a log holding more than the limit (the
 * limit was lowered), the entry that brings it back under it. 0 for an empty log.
 */
function moreOf(log: SlidingLogState, limit: number, windowMs: number, now: number): number {
  return log.length > 0 ? log[Math.max(log.length - limit, 0)] + windowMs - now : 0;
}

/** Entries still inside (now − W, now]. */
function trim(state: SlidingLogState | undefined, windowMs: number, now: number): SlidingLogState {
  if (!state) return [];
  const cut = now - windowMs;
  let i = 0;
  while (i < state.length && state[i] <= cut) i++;
  return i === 0 ? state : state.slice(i);
}

/** Adds `cost` entries at `now`, keeping the log sorted even if the clock stepped back. */
function insert(log: SlidingLogState, now: number, cost: number): SlidingLogState {
  let at = log.length;
  while (at > 0 && log[at - 1] > now) at--;
  return [...log.slice(0, at), ...new Array<number>(cost).fill(now), ...log.slice(at)];
}
