import type { RateLimitDecision } from '../interfaces/decision.interface';

/**
 * How a policy gives quota back, to tell the soonest a queued call can start: `steady`, one unit every
 * `windowMs / limit` (token-bucket, gcra, leaky-bucket); `windowed`, at most `limit` units per window (the
 * window algorithms); `unknown` (concurrency: a slot comes back when its holder releases it).
 */
export interface WaitPace {
  kind: 'steady' | 'windowed' | 'unknown';
  limit: number;
  windowMs: number;
}

const STEADY = new Set(['token-bucket', 'gcra', 'leaky-bucket']);
const WINDOWED = new Set(['fixed-window', 'sliding-window', 'sliding-log']);

/** The pace of an algorithm with these params (see {@link WaitPace}). */
export function paceOf(algorithm: string, limit: number, windowMs: number): WaitPace {
  const kind = STEADY.has(algorithm) ? 'steady' : WINDOWED.has(algorithm) ? 'windowed' : 'unknown';
  return { kind, limit, windowMs };
}

/**
 * What one wait queue knows of its counter, in `performance.now()` time, to tell when a call can start at the
 * soonest. Every store answer to the queue's head updates it: an admission makes the counter's state unknown
 * again; a retry says the counter cannot take the head's cost before then — nor any larger cost (every
 * algorithm's retry grows with the cost); a lockout's end binds every call.
 */
export class CounterOutlook {
  /** No call of at least {@link readyCost} units can be admitted before this; 0 when nothing is known. */
  private readyAt = 0;
  private readyCost = 0;
  /** `readyAt` is the sleeping head's own retry: the calls behind it follow at the policy's pace. */
  private paced = false;

  /** The head was admitted. */
  admitted(): void {
    this.readyAt = 0;
    this.readyCost = 0;
    this.paced = false;
  }

  /** The head, of `cost` units, was rejected at `now` by `decision` (and sleeps until its retry, unless it leaves). */
  rejected(now: number, cost: number, decision: RateLimitDecision): void {
    const retry = decision.retryAfterMs;
    const byCounter = decision.reason === undefined;
    this.readyAt = Number.isFinite(retry) ? now + retry : 0;
    this.readyCost = byCounter ? cost : 0;
    this.paced = byCounter;
  }

  /** The head left without being admitted: what the counter said still holds, but no one now sleeps on it. */
  headLeft(): void {
    this.paced = false;
  }

  /** Until when a head of `cost` units may sleep instead of asking (the store would only tell it to wait); 0: ask now. */
  sleepUntil(cost: number, now: number): number {
    return cost >= this.readyCost && this.readyAt > now ? this.readyAt : 0;
  }

  /**
   * The soonest a call of `cost` units can start, with `units` (its own cost plus those between it and the
   * head) to be served after a head of `headCost`: the head's retry time, then the policy's pace. A lower
   * bound — other processes sharing the quota only make it later — so a call turned away for it could not
   * have made it. (Not the pace this process has really been served at: that measure is noisy, and turning
   * calls away is final, so it turned away calls that would have made it.)
   */
  soonest(now: number, cost: number, pace: WaitPace, units: number, headCost: number): number {
    if (!this.paced) return cost >= this.readyCost ? Math.max(now, this.readyAt) : now;
    const { kind, limit, windowMs } = pace;
    let after = 0;
    if (kind === 'steady') after = (units * windowMs) / limit;
    // The head's retry opens at most `limit` units per window, the head's own among them.
    else if (kind === 'windowed') after = Math.floor((headCost + units - 1) / limit) * windowMs;
    return Math.max(now, this.readyAt + after);
  }
}
