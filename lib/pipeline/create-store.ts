import type { Redis, RedisOptions } from 'ioredis';
import type { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { MemoryStore, type RateLimitClock } from '../stores/memory/memory.store';
import { RedisStore } from '../stores/redis/redis.store';
import { ResilientStore, type ResilientStoreOptions } from './resilient.store';
import { SheddingStore } from './shedding.store';
import { SlicingStore } from './slicing.store';
import { describeRedis } from '../stores/store-description';
import type { RateLimitStore } from '../stores/store.interface';
import { isRedisClient } from '../interfaces/client-types';
import { loadIoredis } from '../stores/redis/transports/ioredis.transport';

/**
 * Defaults for clients this library creates: fail fast instead of queueing while disconnected (a rate
 * limiter must answer within its deadline), and keep reconnecting in the background. The backoff is capped at
 * 1 s: once Redis is back, every moment until the next attempt is decided by `onStoreError` (503s when
 * fail-closed), while an attempt at a Redis that is down costs a refused connection (with a 2 s cap, decisions
 * came back up to 2.2 s after Redis listened again). No auto-pipelining: the store batches a tick's decisions
 * itself, and where it does not (`batchDecisions: false`) ioredis's auto-pipeline holds each call back (see
 * bench/README.md).
 */
export const OWNED_CLIENT_DEFAULTS: RedisOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  retryStrategy: (attempt) => Math.min(50 * 2 ** attempt, 1_000),
};

/** The module's `redis` option, when set. */
type RedisOption = NonNullable<RateLimitModuleOptions['redis']>;

/**
 * The store the options ask for: the memory store, or Redis (from a URL, ioredis options, or a client of yours:
 * ioredis, node-redis or Valkey GLIDE) in the decision pipeline. Each layer wraps the one before it (a
 * `StoreLayer`); a decision meets them in the opposite order: the engine's deny list (in front of the store),
 * hot-key shedding, quota slices, resilience, then Redis.
 */
export function createStore(options: RateLimitModuleOptions, registry: RateLimitAlgorithmRegistry, clock?: RateLimitClock): RateLimitStore {
  const { redis } = options;
  if (redis === undefined) return new MemoryStore({ maxKeys: options.memory?.maxKeys, clock });
  const redisStore = redisStoreFor(redis, registry, options);
  const shedding = options.hotKeyShedding ?? {};
  let store: RateLimitStore = redisStore;
  store = new ResilientStore(store, resilienceOptions(redis, redisStore, options)); // deadline, circuit, onStoreError
  store = new SlicingStore(store); // policies with `slice`
  if (shedding !== false) store = new SheddingStore(store, shedding.maxKeys ?? 10_000); // hotKeyShedding
  return store;
}

/** Redis from a client of yours (yours to close), or from a URL or ioredis options (a client this library owns). */
function redisStoreFor(redis: RedisOption, registry: RateLimitAlgorithmRegistry, options: RateLimitModuleOptions): RedisStore {
  const batch = options.batchDecisions ?? true;
  return isRedisClient(redis)
    ? new RedisStore(redis, registry.all(), false, batch)
    : watched(new RedisStore(createClient(redis), registry.all(), true, batch), options);
}

/** What {@link ResilientStore} needs from the options, and from the Redis store it wraps. */
function resilienceOptions(redis: RedisOption, redisStore: RedisStore, options: RateLimitModuleOptions): ResilientStoreOptions {
  return {
    timeoutMs: options.storeTimeoutMs ?? 100,
    insuranceShare: options.insuranceShare, // absent: 1 / the instances live (see ResilientStore)
    logIntervalMs: options.storeErrorLogIntervalMs ?? 10_000,
    retryAfterFailureMs: 250,
    onError: options.hooks?.storeError,
    name: describeRedis(redis),
    connectionError: () => redisStore.connectionError(),
    // On a Cluster, one circuit per master: one master's outage must not send every other key to the fallback.
    shardOf: redisStore.isCluster ? (key) => redisStore.nodeOf(key) : undefined,
  };
}

function createClient(redis: string | RedisOptions): Redis {
  const { Redis: Client } = loadIoredis();
  if (typeof redis === 'string') return new Client(redis, OWNED_CLIENT_DEFAULTS);
  return new Client({ ...OWNED_CLIENT_DEFAULTS, ...redis, ...sentinelDefaults(redis) });
}

/**
 * Through Sentinel, follow a failover as soon as the sentinels announce it (`+switch-master`): without the
 * failover detector, ioredis stays on the old master until it is demoted, seconds later, and every decision
 * it takes meanwhile is lost with its demotion (a fixed window of 100 admitted 161 across `SENTINEL FAILOVER`).
 * A `failoverDetector` the user set is kept.
 */
function sentinelDefaults(redis: RedisOptions): RedisOptions {
  return redis.sentinels?.length ? { failoverDetector: redis.failoverDetector ?? true } : {};
}

/**
 * Listens to a client this library created. Connection errors surface through decisions (logged at most once
 * per interval by ResilientStore, with the last one as the cause); without a listener ioredis would print every
 * reconnect attempt.
 */
function watched(store: RedisStore, options: RateLimitModuleOptions): RedisStore {
  const client = store.client as Redis;
  client.on('error', (error: Error) => {
    store.noteConnection(error);
    options.hooks?.storeError?.(error);
  });
  client.on('ready', () => store.noteConnection(undefined));
  return store;
}
