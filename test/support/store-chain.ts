import type { Redis } from 'ioredis';
import type { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { createStore } from '../../lib/pipeline/create-store';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RateLimitStore } from '../../lib/stores/store.interface';

/**
 * The ioredis client of the RedisStore at the bottom of a store `createStore` built from a URL or options
 * (under its shedding, slicing and resilience layers, whichever are there).
 */
export function ownedClientOf(store: RateLimitStore): Redis {
  let layer: unknown = store;
  while (layer !== undefined && !(layer instanceof RedisStore)) {
    // Every pipeline layer (a StoreLayer) names the store it wraps `inner`.
    layer = (layer as { inner?: unknown }).inner;
  }
  if (!(layer instanceof RedisStore)) throw new Error('no RedisStore under this store: was it built by createStore with Redis?');
  return layer.client as Redis;
}

/** A `RateLimiterService` over the store stack `createStore` builds from `options`: what an app's module gets. */
export function serviceOver(
  options: RateLimitModuleOptions,
  registry: RateLimitAlgorithmRegistry,
): { svc: RateLimiterService; store: RateLimitStore } {
  const store = createStore(options, registry);
  return { svc: new RateLimiterService(new RateLimitEngine(store, options), registry, options), store };
}
