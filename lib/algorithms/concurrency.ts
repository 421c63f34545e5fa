import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';

/** Live leases: member `<token>:<i>` and its expiry (ms), sorted by expiry. */
export type ConcurrencyState = Array<{ member: string; expiresAt: number }>;

/**
 * `concurrency`: at most `limit` leases held at once. A lease is released when the work ends, or expires
 * after `window` if its holder died.
 */
@Injectable()
export class ConcurrencyAlgorithm implements RateLimitAlgorithm<ConcurrencyState> {
  readonly name = 'concurrency';
  readonly id = 7;
  readonly keyTag = 'cc';
  readonly redisType = 'zset';
  readonly usesBurst = false;
  readonly lua = readFileSync(join(__dirname, 'concurrency.lua'), 'utf8');

  check(
    state: ConcurrencyState | undefined,
    { limit, windowMs }: AlgorithmParams,
    cost: number,
    now: number,
    token: string,
  ): AlgorithmVerdict<ConcurrencyState> {
    const leases = live(state, now);
    const n = leases.length;
    const latest = n > 0 ? leases[n - 1].expiresAt - now : 0;
    if (n + cost <= limit) {
      const resetMs = Math.max(cost > 0 ? windowMs : 0, latest);
      const added = Array.from({ length: cost }, (_, i) => ({ member: `${token}:${i + 1}`, expiresAt: now + windowMs }));
      const next = [...leases, ...added].sort((a, b) => a.expiresAt - b.expiresAt);
      return { allowed: true, remaining: limit - n - cost, resetMs, retryAfterMs: 0, delayMs: 0, next, ttlMs: resetMs };
    }
    const need = n + cost - limit;
    return {
      allowed: false,
      remaining: Math.max(limit - n, 0),
      resetMs: latest,
      retryAfterMs: need <= n ? leases[need - 1].expiresAt - now : 0,
      delayMs: 0,
      next: undefined,
      ttlMs: 0,
    };
  }

  refund(state: ConcurrencyState | undefined, _params: AlgorithmParams, cost: number, now: number, token: string) {
    if (!state) return undefined;
    const released = new Set(Array.from({ length: cost }, (_, i) => `${token}:${i + 1}`));
    const next = live(state, now).filter((lease) => !released.has(lease.member));
    return { next, ttlMs: next.length > 0 ? next[next.length - 1].expiresAt - now : 0 };
  }
}

function live(state: ConcurrencyState | undefined, now: number): ConcurrencyState {
  return state ? state.filter((lease) => lease.expiresAt > now) : [];
}
