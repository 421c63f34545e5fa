import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { RateLimitCall, RateLimitStore, StoreDecision } from './store.interface';

/**
 * Checks that `store` answers: its own `ping()` when it has one (Redis `PING`), nothing for in-process
 * stores (always up). Rejects when the store does not answer; adds no deadline of its own.
 */
export async function pingStore(store: RateLimitStore): Promise<void> {
  if (store.ping) await store.ping();
}

/** `store.penalize(calls)`; rejects with a RateLimitStoreError when the store cannot charge a penalty. */
export function penalizeIn(store: RateLimitStore, calls: readonly RateLimitCall[]): Promise<StoreDecision> {
  if (!store.penalize) return Promise.reject(new RateLimitStoreError('This rate-limit store cannot charge a penalty.'));
  return store.penalize(calls);
}

/**
 * Whether `error` from `store` means it cannot serve now (an outage) rather than one call's own failure: the
 * store's own `isOutage` when it has one; else a `RateLimitStoreError` says so itself, and any other failure is
 * an outage.
 */
export function isOutageOf(store: RateLimitStore, error: unknown): boolean {
  return store.isOutage?.(error) ?? !(error instanceof RateLimitStoreError && !error.outage);
}
