import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';

/** Live leases: member `<token>:<i>` and its expiry (ms), sorted by expiry. */
export type ConcurrencyState = Array<{ member: string; expiresAt: number }>;

/**
 * `concurrency`: at most `limit` leases held at once. A lease is released when the work ends, or expires
 * after `window` if its holder died. A negative cost renews the lease named by `token` (see concurrency.lua).
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
    params: AlgorithmParams,
    cost: number,
    now: number,
    token: string,
  ): AlgorithmVerdict<ConcurrencyState> {
    const { limit, windowMs } = params;
    const leases = live(state, now);
    if (cost < 0) return renew(leases, params, -cost, now, token);
    const n = leases.length;
    const latest = n > 0 ? leases[n - 1].expiresAt - now : 0;
    if (n + cost <= limit) {
      const resetMs = Math.max(cost > 0 ? windowMs : 0, latest);
      const added = Array.from({ length: cost }, (_, i) => ({ member: `${token}:${i + 1}`, expiresAt: now + windowMs }));
      const next = [...leases, ...added].sort((a, b) => a.expiresAt - b.expiresAt);
      const moreQuotaMs = moreOf(next, limit, now);
      return { allowed: true, remaining: limit - n - cost, resetMs, retryAfterMs: 0, delayMs: 0, moreQuotaMs, next, ttlMs: resetMs };
    }
    const need = n + cost - limit;
    return {
      allowed: false,
      remaining: Math.max(limit - n, 0),
      resetMs: latest,
      retryAfterMs: need <= n ? leases[need - 1].expiresAt - now : 0,
      delayMs: 0,
      moreQuotaMs: moreOf(leases, limit, now),
      next: undefined,
      ttlMs: 0,
    };
  }

  refund(state: ConcurrencyState | undefined, _params: AlgorithmParams, cost: number, now: number, token: string) {
    if (!state) return undefined;
    const leases = live(state, now);
    const released = leaseMembers(leases, token, cost);
    const next = leases.filter((lease) => !released.has(lease.member));
    return { next, ttlMs: next.length > 0 ? next[next.length - 1].expiresAt - now : 0 };
  }
}

/**
 * The members of the lease named by `token` among `leases`: `<token>:1`, `<token>:2`… up to `units` or the
 * first one missing, as the Lua loop stops there (so a cost above what is held costs nothing).
 */
function leaseMembers(leases: ConcurrencyState, token: string, units: number): Set<string> {
  const present = new Set(leases.map((lease) => lease.member));
  const members = new Set<string>();
  for (let i = 1; i <= units && present.has(`${token}:${i}`); i++) members.add(`${token}:${i}`);
  return members;
}

/** A renewal: when the live lease named by `token` holds `units`, their expiry moves to `now + window` (never earlier). */
function renew(
  leases: ConcurrencyState,
  { limit, windowMs: ms }: AlgorithmParams,
  units: number,
  now: number,
  token: string,
): AlgorithmVerdict<ConcurrencyState> {
  const members = leaseMembers(leases, token, units);
  const n = leases.length;
  const latest = n > 0 ? leases[n - 1].expiresAt - now : 0;
  if (members.size === 0) {
    const moreQuotaMs = moreOf(leases, limit, now);
    return {
      allowed: false,
      remaining: Math.max(limit - n, 0),
      resetMs: latest,
      retryAfterMs: 0,
      delayMs: 0,
      moreQuotaMs,
      next: undefined,
      ttlMs: 0,
    };
  }
  const expiresAt = now + ms;
  const next = leases
    .map((lease) => (members.has(lease.member) && lease.expiresAt < expiresAt ? { member: lease.member, expiresAt } : lease))
    .sort((a, b) => a.expiresAt - b.expiresAt);
  const resetMs = Math.max(ms, latest);
  return {
    allowed: true,
    remaining: limit - n,
    resetMs,
    retryAfterMs: 0,
    delayMs: 0,
    moreQuotaMs: moreOf(next, limit, now),
    next,
    ttlMs: resetMs,
  };
}

/**
 * When `remaining` next grows: the soonest lease expiry — or, with more leases live than the limit (it was
 * lowered), the expiry that takes them below it. 0 when none is live.
 */
function moreOf(leases: ConcurrencyState, limit: number, now: number): number {
  return leases.length > 0 ? leases[Math.max(leases.length - limit, 0)].expiresAt - now : 0;
}

function live(state: ConcurrencyState | undefined, now: number): ConcurrencyState {
  return state ? state.filter((lease) => lease.expiresAt > now) : [];
}
