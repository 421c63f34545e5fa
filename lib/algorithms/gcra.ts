import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ceilDiv } from '../utils/math';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';
import { decideBucket } from './bucket';

/** Theoretical arrival time: whole ms `t` plus `r` in 1/limit ms. */
export interface GcraState {
  t: number;
  r: number;
}

/**
 * `gcra`: the generic cell rate algorithm, one timestamp per key. Same decisions as `token-bucket` with the
 * same limit, window and burst, in less state.
 */
export class GcraAlgorithm implements RateLimitAlgorithm<GcraState> {
  readonly name = 'gcra';
  readonly id = 5;
  readonly keyTag = 'gc';
  readonly redisType = 'hash';
  readonly usesBurst = true;
  readonly lua = readFileSync(join(__dirname, 'gcra.lua'), 'utf8');

  check(state: GcraState | undefined, params: AlgorithmParams, cost: number, now: number): AlgorithmVerdict<GcraState> {
    const v = decideBucket(debtOf(state, params.limit, now), params, cost);
    return { ...v, delayMs: 0, ...(v.allowed ? stored(v.debt, params.limit, now) : { next: undefined, ttlMs: 0 }) };
  }

  refund(state: GcraState | undefined, params: AlgorithmParams, cost: number, now: number) {
    return stored(Math.max(debtOf(state, params.limit, now) - cost * params.windowMs, 0), params.limit, now);
  }
}

function debtOf(state: GcraState | undefined, limit: number, now: number): number {
  if (!state) return 0;
  return Math.max((state.t - now) * limit + state.r, 0);
}

function stored(debt: number, limit: number, now: number) {
  if (debt === 0) return { next: undefined, ttlMs: 0 };
  return { next: { t: now + Math.floor(debt / limit), r: debt % limit }, ttlMs: ceilDiv(debt, limit) };
}
