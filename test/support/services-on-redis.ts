import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { libraryClient, startRedis, type RedisProcess } from './redis-server';
import { serviceOver } from './store-chain';

/** One instance: a service over the module's store stack, with a client of its own. */
export interface RedisInstance {
  svc: RateLimiterService;
  store: RateLimitStore;
}

/**
 * `RateLimiterService` instances on one real redis-server the suite starts, each with its own client and store
 * (as separate app processes would have), built by `createStore` with `defaults` and then the instance's own
 * options. Registers the suite's `beforeAll` (the server) and `afterAll` (every store, client and the server).
 */
export function servicesOnRedis(defaults: Partial<RateLimitModuleOptions>) {
  const registry = new RateLimitAlgorithmRegistry();
  let redis: RedisProcess | undefined;
  let admin: Redis | undefined;
  const clients: Redis[] = [];
  const stores: RateLimitStore[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  }, 30_000);

  afterAll(async () => {
    for (const store of stores) await store.close();
    for (const client of clients) client.disconnect();
    admin?.disconnect();
    await redis?.stop();
  });

  return {
    /** A client of the suite's own, to inspect the server (`INFO`, `CONFIG RESETSTAT`). */
    admin: (): Redis => admin!,
    async instance(extra: Partial<RateLimitModuleOptions> = {}): Promise<RedisInstance> {
      const client = await libraryClient(redis!.url);
      clients.push(client);
      // A long deadline unless the suite sets one: exact counts must not hinge on redis-server getting a core in 100 ms.
      const options: RateLimitModuleOptions = { redis: client, storeTimeoutMs: 5_000, ...defaults, ...extra };
      const { svc, store } = serviceOver(options, registry);
      stores.push(store);
      return { svc, store };
    },
    /** Closes an instance's store now instead of after the suite. */
    async close(store: RateLimitStore): Promise<void> {
      stores.splice(stores.indexOf(store), 1);
      await store.close();
    },
  };
}
