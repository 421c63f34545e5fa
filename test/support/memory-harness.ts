import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { MemoryStore } from '../../lib/stores/memory/memory.store';

/** A multiple of every window the unit tests use, so fixed windows start exactly at T0. */
export const T0 = 1_700_000_000_000;

/** A service on the memory store with a fake clock starting at {@link T0}. */
export function memoryHarness(maxKeys?: number) {
  let now = T0;
  const store = new MemoryStore({ clock: () => now, maxKeys });
  const limiter = new RateLimiterService(new RateLimitEngine(store), new RateLimitAlgorithmRegistry(), { prefix: 'x' });
  return {
    store,
    limiter,
    advance(ms: number) {
      now += ms;
    },
    at(ms: number) {
      now = ms;
    },
  };
}
