import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ceilDiv } from '../shared/math';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';
import { decideBucket, toVerdict } from './bucket';

/** Tokens scaled by `k` (the window they were scaled with), and the last refill time in ms. */
export interface TokenBucketState {
  s: number;
  t: number;
  k: number;
}

/**
 * `token-bucket`: starts full with `burst` tokens and refills continuously at `limit / window`; a request
 * takes `cost` tokens. Same decisions as `gcra` with the same limit, window and burst.
 */
@Injectable()
export class TokenBucketAlgorithm implements RateLimitAlgorithm<TokenBucketState> {
  readonly name = 'token-bucket';
  readonly id = 4;
  readonly keyTag = 't';
  readonly redisType = 'string';
  readonly usesBurst = true;
  readonly lua = readFileSync(join(__dirname, 'token-bucket.lua'), 'utf8');

  check(state: TokenBucketState | undefined, params: AlgorithmParams, cost: number, now: number): AlgorithmVerdict<TokenBucketState> {
    const { debt, at } = this.debt(state, params, now);
    const v = decideBucket(debt, params, cost);
    const next = v.allowed && v.debt > 0 ? this.state(v.debt, at, params) : undefined;
    return toVerdict<TokenBucketState>(v, 0, { next, ttlMs: v.allowed ? v.resetMs : 0 });
  }

  refund(state: TokenBucketState | undefined, params: AlgorithmParams, cost: number, now: number) {
    const { debt, at } = this.debt(state, params, now);
    const after = Math.max(debt - cost * params.windowMs, 0);
    return { next: after > 0 ? this.state(after, at, params) : undefined, ttlMs: ceilDiv(after, params.limit) };
  }

  /** Debt (scaled units below full) after refilling up to `now`, and the time the refill stands at. */
  private debt(state: TokenBucketState | undefined, { limit, windowMs, burst }: AlgorithmParams, now: number) {
    const capacity = burst * windowMs;
    if (!state) return { debt: 0, at: now };
    let s = state.k !== windowMs ? Math.floor((state.s * windowMs) / state.k) : state.s;
    let at = now;
    if (now > state.t) s += (now - state.t) * limit;
    else at = state.t;
    return { debt: capacity - Math.min(s, capacity), at };
  }

  private state(debt: number, at: number, { windowMs, burst }: AlgorithmParams): TokenBucketState {
    return { s: burst * windowMs - debt, t: at, k: windowMs };
  }
}
