import { Injectable } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ceilDiv } from '../shared/math';
import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';
import { decideBucket, NOTHING_STORED, toVerdict } from './bucket';

/** Queue level scaled by `k` (the window it was scaled with), and the last leak time in ms. */
export interface LeakyBucketState {
  l: number;
  t: number;
  k: number;
}

/**
 * `leaky-bucket`: a queue of up to `burst` units draining at `limit / window`. An admitted request gets
 * `delayMs`, the time until its turn at the constant rate, so traffic leaves evenly spaced (shaping).
 */
@Injectable()
export class LeakyBucketAlgorithm implements RateLimitAlgorithm<LeakyBucketState> {
  readonly name = 'leaky-bucket';
  readonly id = 6;
  readonly keyTag = 'l';
  readonly redisType = 'string';
  readonly usesBurst = true;
  readonly lua = readFileSync(join(__dirname, 'leaky-bucket.lua'), 'utf8');

  check(state: LeakyBucketState | undefined, params: AlgorithmParams, cost: number, now: number): AlgorithmVerdict<LeakyBucketState> {
    const { level, at } = levelOf(state, params, now);
    const v = decideBucket(level, params, cost);
    const delayMs = v.allowed ? ceilDiv(level, params.limit) : 0;
    return toVerdict<LeakyBucketState>(v, delayMs, v.allowed ? stored(v.debt, at, params) : NOTHING_STORED);
  }

  refund(state: LeakyBucketState | undefined, params: AlgorithmParams, cost: number, now: number) {
    const { level, at } = levelOf(state, params, now);
    return stored(Math.max(level - cost * params.windowMs, 0), at, params);
  }
}

function levelOf(state: LeakyBucketState | undefined, { limit, windowMs }: AlgorithmParams, now: number) {
  if (!state) return { level: 0, at: now };
  let level = state.k !== windowMs ? ceilDiv(state.l * windowMs, state.k) : state.l;
  let at = now;
  if (now > state.t) level -= (now - state.t) * limit;
  else at = state.t;
  return { level: Math.max(level, 0), at };
}

function stored(level: number, at: number, { limit, windowMs }: AlgorithmParams) {
  if (level === 0) return { next: undefined, ttlMs: 0 };
  return { next: { l: level, t: at, k: windowMs }, ttlMs: ceilDiv(level, limit) };
}
