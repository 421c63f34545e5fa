import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ceilDiv } from '../shared/math';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';
import { decideBucket, NOTHING_STORED, toVerdict } from './bucket';

/**
 * Theoretical arrival time: whole ms `t` plus `r` in 1/`l` ms, measured with limit `l` and window `w`
 * (kept so that a changed rate rescales what is owed).
 */
export interface GcraState {
  t: number;
  r: number;
  l: number;
  w: number;
}

/**
 * `gcra`: the generic cell rate algorithm, one timestamp per key. Same decisions as `token-bucket` with the
 * same limit, window and burst, in less state.
 */
@Injectable()
export class GcraAlgorithm implements RateLimitAlgorithm<GcraState> {
  readonly name = 'gcra';
  readonly id = 5;
  readonly keyTag = 'g';
  readonly redisType = 'string';
  readonly usesBurst = true;
  readonly lua = readFileSync(join(__dirname, 'gcra.lua'), 'utf8');

  check(state: GcraState | undefined, params: AlgorithmParams, cost: number, now: number): AlgorithmVerdict<GcraState> {
    const debt = debtOf(state, params, now);
    const v = decideBucket(debt, params, cost);
    const rewrite = state && debt > 0 && (state.l !== params.limit || state.w !== params.windowMs) ? stored(debt, params, now) : undefined;
    return toVerdict<GcraState>(v, 0, v.allowed ? stored(v.debt, params, now) : NOTHING_STORED, rewrite);
  }

  refund(state: GcraState | undefined, params: AlgorithmParams, cost: number, now: number) {
    return stored(Math.max(debtOf(state, params, now) - cost * params.windowMs, 0), params, now);
  }
}

/**
 * What is owed, in window-scaled units; rescaled from the window it was measured with. A state measured
 * with another limit or window is rewritten in the current units (`rewrite`), as gcra.lua does.
 */
function debtOf(state: GcraState | undefined, { windowMs }: AlgorithmParams, now: number): number {
  if (!state) return 0;
  const debt = (state.t - now) * state.l + state.r;
  if (debt <= 0) return 0;
  return state.w !== windowMs ? ceilDiv(debt * windowMs, state.w) : debt;
}

function stored(debt: number, { limit, windowMs }: AlgorithmParams, now: number) {
  if (debt === 0) return { next: undefined, ttlMs: 0 };
  return { next: { t: now + Math.floor(debt / limit), r: debt % limit, l: limit, w: windowMs }, ttlMs: ceilDiv(debt, limit) };
}
