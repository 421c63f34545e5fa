import { RedisStore } from './redis.store';
import type { RateLimitStore } from './store.interface';

/**
 * Checks that `store` answers: its own `ping()` when it has one, Redis `PING` on a {@link RedisStore}'s
 * client (one node of a cluster), nothing for in-process stores (always up). Rejects when the store does not
 * answer; adds no deadline of its own.
 */
export async function pingStore(store: RateLimitStore): Promise<void> {
  if (store.ping) return store.ping();
  if (store instanceof RedisStore) await store.client.ping();
}
