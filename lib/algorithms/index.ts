import { ConcurrencyAlgorithm } from './concurrency';
import { FixedWindowAlgorithm } from './fixed-window';
import { GcraAlgorithm } from './gcra';
import { LeakyBucketAlgorithm } from './leaky-bucket';
import { SlidingLogAlgorithm } from './sliding-log';
import { SlidingWindowAlgorithm } from './sliding-window';
import { TokenBucketAlgorithm } from './token-bucket';

export type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from './algorithm.interface';
export {
  ConcurrencyAlgorithm,
  FixedWindowAlgorithm,
  GcraAlgorithm,
  LeakyBucketAlgorithm,
  SlidingLogAlgorithm,
  SlidingWindowAlgorithm,
  TokenBucketAlgorithm,
};

/** Every built-in algorithm class, in dispatch-id order. */
export const ALGORITHM_CLASSES = [
  FixedWindowAlgorithm,
  SlidingWindowAlgorithm,
  SlidingLogAlgorithm,
  TokenBucketAlgorithm,
  GcraAlgorithm,
  LeakyBucketAlgorithm,
  ConcurrencyAlgorithm,
] as const;
