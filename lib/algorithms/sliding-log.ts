import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';
import { chargedAt } from './charged-at';

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

  refund(state: SlidingLogState | undefined, { limit, windowMs }: AlgorithmParams, cost: number, now: number, token: string) {
    const log = trim(state, windowMs, now);
    // A negative cost is a penalty (or an overdraft): log that many units now, as an admitted request would,
    // up to twice the limit: one entry per unit, so penalties without end would be memory without end.
    if (cost < 0) {
      const add = Math.min(-cost, Math.max(2 * limit - log.length, 0));
      return add > 0 ? { next: insert(log, now, add), ttlMs: windowMs } : undefined;
    }
    if (log.length === 0) return undefined;
    const at = chargedAt(token);
    const next = at === undefined ? log.slice(0, Math.max(log.length - cost, 0)) : withoutEntriesAt(log, at, cost);
    if (next === log) return undefined;
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

/**
 * `log` without up to `cost` of its entries at `at` (a settlement gives back the units its reservation logged
 * then; entries of one millisecond age out together, so any of them will do): none once they have aged out,
 * never someone else's later ones. `log` itself when there is none.
 */
function withoutEntriesAt(log: SlidingLogState, at: number, cost: number): SlidingLogState {
  let end = log.length;
  while (end > 0 && log[end - 1] > at) end--;
  let start = end;
  while (start > 0 && log[start - 1] === at && end - start < cost) start--;
  return start === end ? log : [...log.slice(0, start), ...log.slice(end)];
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
