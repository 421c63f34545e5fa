/**
 * What each client library (ioredis, node-redis 5, Valkey GLIDE 2) must do beyond deciding, against real
 * redis-servers and a real 3-master Cluster, with the same assertions for each:
 *  - the startup line names the store and the client;
 *  - NOSCRIPT recovery: `SCRIPT FLUSH` before every decision (on every node of the Cluster), single and
 *    batched calls: no error, exact counts (a server that evicts its script cache looks the same);
 *  - `ready`, `ping`, and a WRONGTYPE error that names the key holding someone else's data;
 *  - a closed client: a decision rejects at once, not after a deadline;
 *  - a hung server (SIGSTOP): decisions are answered by the fallback within the deadline, and the calls in
 *    flight settle once it resumes (nothing is left pending);
 *  - a restarted server (SIGKILL, then the same port): decisions reach Redis again;
 *  - a node-redis client with its offline queue on gets a startup warning (see test/support/redis-clients.ts).
 */
import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitStoreError } from '../../lib/errors/rate-limit-store.error';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { describeStore } from '../../lib/stores/store-description';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import type { RateLimitCall, RateLimitStore } from '../../lib/stores/store.interface';
import type { RedisClient } from '../../lib/interfaces/client-types';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { REDIS_CLIENTS, type RedisClientKind } from '../support/redis-clients';
import { startRedis, startRedisCluster, type RedisClusterProcess, type RedisProcess } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const registry = new RateLimitAlgorithmRegistry();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const five: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: '1h', name: 'five' };
const engine = new RateLimitEngine(new MemoryStore());
const CLIENT_NAMES = { ioredis: '', 'node-redis': ' via node-redis', GLIDE: ' via Valkey GLIDE' };

let redis: RedisProcess;
let cluster: RedisClusterProcess;
let admin: Redis;
const admins: Redis[] = [];

beforeAll(async () => {
  [redis, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
  admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  for (const node of cluster.nodes) admins.push(new Redis({ port: node.port, maxRetriesPerRequest: 1 }));
}, 60_000);

afterAll(async () => {
  admin?.disconnect();
  for (const a of admins) a.disconnect();
  await redis?.stop();
  await cluster?.stop();
});

beforeEach(() => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
});

afterEach(() => {
  jest.restoreAllMocks();
});

/** A service on the module's store stack around `client`: fail-closed, so a fallback shows as `store-unavailable`. */
function service(client: RedisClient, prefix: string, storeTimeoutMs = 5_000): { svc: RateLimiterService; store: RateLimitStore } {
  const options: RateLimitModuleOptions = { redis: client, prefix, storeTimeoutMs, onStoreError: 'fail-closed', hotKeyShedding: false };
  const { svc, store } = serviceOver(options, registry);
  return { svc, store };
}

/** The store calls of one decision of `policy` for `tracker`. */
function callsOf(policy: RateLimitPolicy, prefix: string, tracker: string): RateLimitCall[] {
  const compiled = compilePolicy(policy, registry, 'clients', 'svc');
  return engine.calls(trackerKeyPrefix(prefix, tracker), [{ compiled, params: compiled.staticParams!, cost: 1 }]);
}

describe.each(REDIS_CLIENTS)('$name', (kind: RedisClientKind) => {
  const prefix = `cl-${kind.name}`;

  it('the startup line names the store and the client', async () => {
    const client = await kind.connect(redis.port);
    const onCluster = await kind.connectCluster(cluster.startupNodes.slice(0, 1));
    try {
      const suffix = CLIENT_NAMES[kind.name];
      expect(describeStore(client)).toBe(`Rate limits are kept in Redis at 127.0.0.1:${redis.port}${suffix}.`);
      expect(describeStore(onCluster)).toBe(`Rate limits are kept in Redis Cluster (127.0.0.1:${cluster.nodes[0].port})${suffix}.`);
    } finally {
      await kind.close(client);
      await kind.close(onCluster);
    }
  });

  it.each(['standalone', 'cluster'] as const)('NOSCRIPT recovery, %s: SCRIPT FLUSH before every decision, exact counts', async (where) => {
    const client = where === 'standalone' ? await kind.connect(redis.port) : await kind.connectCluster(cluster.startupNodes);
    const flushers = where === 'standalone' ? [admin] : admins;
    const { svc, store } = service(client, `${prefix}-${where}`);
    try {
      const lone: string[] = [];
      for (let i = 0; i < 7; i++) {
        await Promise.all(flushers.map((a) => a.script('FLUSH')));
        const d = await svc.consume(five, 'lone');
        lone.push(`${d.allowed ? 'allowed' : 'rejected'} ${d.remaining}${d.reason ? ` ${d.reason}` : ''}`);
      }
      expect(lone).toEqual(['allowed 4', 'allowed 3', 'allowed 2', 'allowed 1', 'allowed 0', 'rejected 0', 'rejected 0']);
      // Ten decisions in one tick (one batched call on a standalone server) after a flush, twice.
      const batched: boolean[] = [];
      for (let round = 0; round < 2; round++) {
        await Promise.all(flushers.map((a) => a.script('FLUSH')));
        const ds = await Promise.all(Array.from({ length: 10 }, (_, i) => svc.consume(five, `batch-${i % 2}`)));
        expect(ds.filter((d) => d.reason !== undefined)).toEqual([]);
        batched.push(...ds.map((d) => d.allowed));
      }
      expect(batched.filter(Boolean)).toHaveLength(10);
    } finally {
      await store.close();
      await kind.close(client);
    }
  });

  it('ready, ping, and a foreign value that names the key', async () => {
    const client = await kind.connect(redis.port);
    const store = new RedisStore(client, registry.all(), false);
    try {
      expect(await store.ready(1_000)).toBe(true);
      await expect(store.ping()).resolves.toBeUndefined();
      const [call] = callsOf(five, prefix, 'wrong');
      await admin.set(call.stateKey, 'not a count');
      const error = await store.decide([call], 'consume').then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      // The same words through every client, without what each adds around a script's error.
      expect([error?.constructor.name, error?.message]).toEqual([
        RateLimitStoreError.name,
        `Redis key "${call.stateKey}" holds "not a count", which the rate limiter did not write: another application writes ` +
          `under this prefix. Give the rate limiter its own 'prefix' or delete the key.`,
      ]);
    } finally {
      await store.close();
      await kind.close(client);
    }
  });

  it('a closed client: a decision rejects at once', async () => {
    const client = await kind.connect(redis.port);
    const store = new RedisStore(client, registry.all(), false);
    await store.decide(callsOf(five, prefix, 'closed'), 'consume');
    await kind.close(client);
    const started = performance.now();
    await expect(store.decide(callsOf(five, prefix, 'closed'), 'consume')).rejects.toThrow();
    expect(performance.now() - started).toBeLessThan(1_000);
    await store.close();
  });

  it('a hung server: fallbacks within the deadline, and every call in flight settles once it resumes', async () => {
    const own = await startRedis();
    const client = await kind.connect(own.port);
    const { svc, store } = service(client, prefix, 100);
    const bare = new RedisStore(client, registry.all(), false);
    try {
      expect((await svc.consume(five, 'hung')).reason).toBeUndefined();
      own.pause();
      const started = performance.now();
      const fallbacks = await Promise.all(Array.from({ length: 20 }, (_, i) => svc.consume(five, `hung-${i}`)));
      expect(fallbacks.map((d) => d.reason)).toEqual(Array(20).fill('store-unavailable'));
      // A deadline of 100 ms; the slack is for a busy box (waiting for the paused server would never end).
      expect(performance.now() - started).toBeLessThan(100 + 2_000);
      let settled = 0;
      const inFlight = Array.from({ length: 20 }, (_, i) =>
        bare.decide(callsOf(five, prefix, `bare-${i}`), 'consume').finally(() => settled++),
      );
      await sleep(200);
      expect(settled).toBe(0);
      own.resume();
      await Promise.allSettled(inFlight);
      expect(settled).toBe(20);
      expect(await waitForRedis(svc, 'hung-after')).toBe(true);
    } finally {
      own.resume();
      await bare.close();
      await store.close();
      await kind.close(client);
      await own.stop();
    }
  });

  it('a restarted server (SIGKILL, same port): decisions reach Redis again', async () => {
    const own = await startRedis();
    const client = await kind.connect(own.port);
    const { svc, store } = service(client, prefix, 100);
    try {
      expect((await svc.consume(five, 'restart')).reason).toBeUndefined();
      await own.stop(true);
      expect((await svc.consume(five, 'restart')).reason).toBe('store-unavailable');
      await own.restart();
      expect(await waitForRedis(svc, 'restart')).toBe(true);
    } finally {
      await store.close();
      await kind.close(client);
      await own.stop();
    }
  }, 30_000);
});

/** Whether decisions come from Redis again within 10 s (the client reconnects in the background). */
async function waitForRedis(svc: RateLimiterService, tracker: string): Promise<boolean> {
  const until = performance.now() + 10_000;
  while (performance.now() < until) {
    if ((await svc.consume(five, tracker)).reason === undefined) return true;
    await sleep(50);
  }
  return false;
}

describe('node-redis: the offline queue', () => {
  it('a client or cluster with its offline queue on gets a warning naming disableOfflineQueue; one without, none', async () => {
    const { createClient, createCluster } = await import('redis');
    const warned = () => (Logger.prototype.warn as jest.Mock).mock.calls.map(([line]) => String(line));
    const queued = createClient({ url: redis.url });
    const unqueued = createClient({ url: redis.url, disableOfflineQueue: true });
    const unqueuedCluster = createCluster({
      rootNodes: [{ url: `redis://127.0.0.1:${cluster.nodes[0].port}` }],
      defaults: { disableOfflineQueue: true },
    });
    await new RedisStore(unqueued, registry.all(), false).close();
    await new RedisStore(unqueuedCluster, registry.all(), false).close();
    expect(warned()).toEqual([]);
    await new RedisStore(queued, registry.all(), false).close();
    expect(warned()).toEqual([
      expect.stringMatching(/^The node-redis client has its offline queue on: create it with disableOfflineQueue: true/),
    ]);
  });
});
