/**
 * One shard's outage, against real processes:
 *  - Redis Cluster, 3 masters + 3 replicas, SIGKILL of one master under a steady load of decisions on keys
 *    spread over every slot: the store-error circuit is per master, so keys on the two healthy masters keep
 *    being decided by Redis; the killed master's keys go to the fallback until its replica is promoted, then
 *    back to Redis.
 *    - With `cluster-require-full-coverage no`, no decision on a healthy master is ever a fallback.
 *    - With the default (`yes`), Redis itself answers CLUSTERDOWN for every key from the moment the master
 *      is flagged FAIL until the replica takes over: only in that window do healthy keys fall back.
 *  - The slot the library computes for a key (to find its master) is Redis's own (CLUSTER KEYSLOT).
 *  - Standalone Redis after a long outage: how long after the server listens again decisions reach it, in
 *    the worst case (restarted just after a reconnect attempt at the backoff cap).
 */
import { Logger } from '@nestjs/common';
import { Redis, type Cluster } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { OWNED_CLIENT_DEFAULTS } from '../../lib/pipeline/create-store';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { backOnRedis, slotOwners, steadyLoad, trackersByMaster, type Sample } from '../support/master-outage';
import { libraryCluster, startRedis, startRedisCluster, type RedisClusterProcess, type RedisProcess } from '../support/redis-server';
import { ownedClientOf, serviceOver } from '../support/store-chain';

const registry = new RateLimitAlgorithmRegistry();
const PREFIX = 'rl';
// Long enough that a busy CI box never turns a healthy master's decision into a missed deadline.
const TIMEOUT_MS = 400;
const CIRCUIT_MS = 250;
/**
 * README › Guarantees and failure modes, "Redis down or restarting": back on Redis "at most ~1.25 s (reconnect
 * backoff capped at 1 s, plus the 250 ms circuit)" after a long outage. Fixed here, not read from the code, so
 * a larger cap (the 2 s it was: 2.2 s measured) fails the test until the README says otherwise.
 */
const README_WORST_CASE_MS = 1_250;
/** Scheduling slack on a shared 2-core box: the server's own start, a decision's round trip. */
const SLACK_MS = 300;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();
const big: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1_000_000, window: '1h', name: 'big' };

const clusters: RedisClusterProcess[] = [];
const servers: RedisProcess[] = [];
const stores: RateLimitStore[] = [];
const clients: Array<Redis | Cluster> = [];

afterAll(async () => {
  for (const store of stores) await store.close().catch(() => undefined);
  for (const client of clients) client.disconnect();
  for (const cluster of clusters) await cluster.stop();
  for (const server of servers) await server.stop(true);
});

beforeEach(() => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
});

afterEach(() => {
  jest.restoreAllMocks();
});

/** A service on a store built as the module builds it; fail-closed and no hot-key shedding, so every fallback shows as `store-unavailable`. */
function service(redis: RateLimitModuleOptions['redis']): { svc: RateLimiterService; store: RateLimitStore } {
  const options: RateLimitModuleOptions = {
    redis,
    prefix: PREFIX,
    onStoreError: 'fail-closed',
    hotKeyShedding: false,
    storeTimeoutMs: TIMEOUT_MS,
  };
  const { svc, store } = serviceOver(options, registry);
  stores.push(store);
  return { svc, store };
}

interface Outage {
  samples: Sample[];
  failures: unknown[];
  killedAt: number;
  /** First decision by Redis for the killed master's keys after their last fallback. */
  backAt: number;
  victim: number;
  healthy: number[];
  /** When a healthy master reported cluster_state:fail, and ok again. */
  clusterFail: { from: number; to: number };
  /** What the library logged (warnings and recovery lines), when. */
  logs: Array<{ at: number; line: string }>;
}

/**
 * A 3-master + 3-replica cluster under a steady load (one decision per master's group of 60 trackers every
 * 2 ms), SIGKILL of one master, until its keys have been decided by Redis again for 500 ms (or 20 s).
 */
async function killOneMaster(serverArgs: string[]): Promise<Outage> {
  const cluster = await startRedisCluster(3, { replicas: 1, nodeTimeoutMs: 1_000, serverArgs });
  clusters.push(cluster);
  const client = await libraryCluster(cluster.startupNodes);
  const probe = new Redis({ port: cluster.masters[1].port, maxRetriesPerRequest: 1 });
  clients.push(client, probe);
  const { svc } = service(client);
  const logs: Outage['logs'] = [];
  const record = (message: unknown) => void logs.push({ at: now(), line: String(message) });
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(record);
  jest.spyOn(Logger.prototype, 'log').mockImplementation(record);

  const byMaster = await trackersByMaster(
    probe,
    cluster.masters.map((m) => m.port),
    PREFIX,
    60,
  );
  const victim = cluster.masters[0];
  const { samples, failures, stop } = steadyLoad((tracker) => svc.consume(big, tracker), byMaster, 2);
  const clusterFail = { from: Infinity, to: Infinity };
  const watch = setInterval(() => {
    void probe.cluster('INFO').then((info) => {
      const t = now();
      if (String(info).includes('cluster_state:fail')) clusterFail.from = Math.min(clusterFail.from, t);
      else if (clusterFail.from < t && clusterFail.to === Infinity) clusterFail.to = t;
    });
  }, 10);

  await sleep(500);
  const killedAt = now();
  await victim.stop(true);
  const backAt = await backOnRedis(samples, victim.port, killedAt);
  await stop();
  clearInterval(watch);
  const healthy = cluster.masters.slice(1).map((m) => m.port);
  return { samples, failures, killedAt, backAt, victim: victim.port, healthy, clusterFail, logs };
}

/** Prints the outage and checks what holds whatever the server config: the victim's keys fell back, then came back. */
function report(label: string, o: Outage): Sample[] {
  const rel = (t: number) => (t === Infinity ? 'never' : `${Math.round(t - o.killedAt)} ms`);
  const onHealthy = o.samples.filter((s) => o.healthy.includes(s.master));
  const healthyFallbacks = onHealthy.filter((s) => !s.byRedis);
  const victimOutage = o.samples.filter((s) => s.master === o.victim && s.at > o.killedAt && s.at < o.backAt);
  console.log(
    `Cluster (${label}), SIGKILL of 1 of 3 masters, cluster-node-timeout 1000 ms, ${o.samples.length} decisions: its keys ` +
      `decided by Redis again ${rel(o.backAt)} after the kill (${victimOutage.filter((s) => !s.byRedis).length} of its ${victimOutage.length} ` +
      `decisions meanwhile by the fallback); healthy masters' keys: ${healthyFallbacks.length} of ${onHealthy.length} decisions by the ` +
      `fallback (${onHealthy.filter((s) => s.at > o.killedAt && s.at < o.backAt).length} during the outage); cluster_state:fail on a ` +
      `healthy master from ${rel(o.clusterFail.from)} to ${rel(o.clusterFail.to)} after the kill.`,
  );
  for (const { at, line } of o.logs) console.log(`${rel(at)}: ${line}`);
  // One warning naming the killed master, one recovery line once its keys answer again (not while healthy masters answer).
  expect(o.logs.map((l) => l.line)).toEqual([
    expect.stringMatching(new RegExp(`^Redis Cluster \\(.*\\) node 127\\.0\\.0\\.1:${o.victim} is unavailable: .* Deciding its keys with`)),
    expect.stringMatching(/^Redis Cluster \(.*\) is answering again after \d+\.\d s\.$/),
  ]);
  const victims = o.samples.filter((s) => s.master === o.victim && s.at > o.killedAt);
  const firstFallback = victims.find((s) => !s.byRedis)!.at;
  const firstBack = victims.find((s) => s.byRedis && s.at > firstFallback)!.at;
  expect(Math.abs(o.logs[1].at - firstBack)).toBeLessThan(50);
  expect(o.failures).toEqual([]);
  expect(o.backAt).toBeLessThan(Infinity);
  expect(victimOutage.filter((s) => !s.byRedis).length).toBeGreaterThan(0);
  expect(onHealthy.filter((s) => s.at > o.killedAt && s.at < o.backAt).length).toBeGreaterThan(100);
  return healthyFallbacks;
}

describe('Redis Cluster: one master of three killed (each has a replica)', () => {
  it('cluster-require-full-coverage no: no decision for a key on a healthy master is ever a fallback', async () => {
    const outage = await killOneMaster(['--cluster-require-full-coverage', 'no']);
    expect(report('require-full-coverage no', outage).length).toBe(0);
  }, 40_000);

  it('default config: keys on healthy masters fall back only while Redis itself answers CLUSTERDOWN (master flagged FAIL, replica not yet promoted)', async () => {
    const outage = await killOneMaster([]);
    const healthyFallbacks = report('default config', outage);
    const { from, to } = outage.clusterFail;
    // A decision sent just before the state turned ok may still miss its deadline, and its master's circuit then stays open.
    const outside = healthyFallbacks.filter((s) => s.at < from || s.at > to + TIMEOUT_MS + CIRCUIT_MS + 100);
    expect(outside.map((s) => Math.round(s.at - outage.killedAt))).toEqual([]);
  }, 40_000);

  it('the slot the library computes for a key, and so its master, is Redis’s own (CLUSTER KEYSLOT)', async () => {
    const cluster = await startRedisCluster(3);
    clusters.push(cluster);
    const client = await libraryCluster(cluster.startupNodes);
    const probe = new Redis({ port: cluster.nodes[0].port, maxRetriesPerRequest: 1 });
    clients.push(client, probe);
    const store = new RedisStore(client, registry.all(), false);
    const owners = await slotOwners(probe);
    const keys = [
      'rl:{ip:10.0.0.1}:r:default:f',
      '',
      'plain',
      '{}',
      '{}{tag}',
      '{',
      '}{tag}',
      'a{b}c{d}',
      'x{{tag}}y',
      '{é€}',
      '{😀}',
      '{\ud800}',
      '{a\udc00b}',
      `{${'z'.repeat(5_000)}}`,
      trackerKeyPrefix(PREFIX, 'user:42'),
      trackerKeyPrefix(PREFIX, '{weird}\n😀'),
      ...Array.from({ length: 200 }, (_, i) => `key-${i}-${String.fromCharCode(0x20 + ((i * 37) % 0x2fe0))}`),
    ];
    for (const key of keys) {
      const slot = (await probe.cluster('KEYSLOT', key)) as number;
      expect({ key, node: store.nodeOf(key) }).toEqual({ key, node: `127.0.0.1:${owners.get(slot)}` });
    }
  }, 30_000);
});

describe('standalone Redis: recovery after a long outage', () => {
  it('worst case (restarted just after a reconnect attempt at the 1 s backoff cap): decisions back on Redis within the README’s ~1.25 s', async () => {
    const redis = await startRedis();
    servers.push(redis);
    const { svc, store } = service(redis.url);
    expect(await store.ready?.(5_000)).toBe(true);
    const client = ownedClientOf(store);
    const cap = (OWNED_CLIENT_DEFAULTS.retryStrategy as (attempt: number) => number)(100);
    expect(cap).toBe(1_000);
    const samples: Array<{ at: number; byRedis: boolean }> = [];
    let running = true;
    const load = (async () => {
      while (running) {
        void svc.consume(big, 'probe').then((d) => void samples.push({ at: now(), byRedis: d.reason === undefined }));
        await sleep(5);
      }
    })();

    await sleep(100);
    const killedAt = now();
    await redis.stop(true);
    // The backoff reaches its cap; restart right after a capped attempt failed: the next is a whole cap away.
    await new Promise<void>((resolve) => {
      const onReconnecting = (delay: number) => {
        if (delay < cap) return;
        client.off('reconnecting', onReconnecting);
        resolve();
      };
      client.on('reconnecting', onReconnecting);
    });
    const restartAt = now();
    await redis.restart();
    const listening = now();
    while (!samples.some((s) => s.byRedis && s.at > listening) && now() - listening < 10_000) await sleep(5);
    running = false;
    await load;
    const back = samples.find((s) => s.byRedis && s.at > listening)!.at;
    console.log(
      `Standalone, SIGKILL, restart after ${Math.round(restartAt - killedAt)} ms (just after a reconnect attempt at the ${cap} ms cap; ` +
        `the server took ${Math.round(listening - restartAt)} ms to listen): decisions back on Redis ${Math.round(back - listening)} ms after it ` +
        `listened, ${Math.round(back - restartAt)} ms after the restart began.`,
    );
    expect(back - restartAt).toBeLessThanOrEqual(README_WORST_CASE_MS + SLACK_MS);
  }, 30_000);
});
