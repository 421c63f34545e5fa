/**
 * Redis Cluster: a real 3-master cluster (redis-server --cluster-enabled yes ×3 + redis-cli --cluster create).
 *  - Every algorithm, and a multi-policy route mixing them, gives the same outcomes as on a standalone
 *    server (allowed/remaining/limit/reason sequences, through consume, peek, refund, block, unblock, reset,
 *    leases).
 *  - Tracker strings with `{`, `}`, `:`, newlines, emoji, or 5,000 bytes work, and every key of a decision
 *    lies in one slot (CLUSTER KEYSLOT), the slot of the tracker's hash tag.
 *  - Different trackers spread over the masters.
 *  - Concurrent decisions for trackers on different nodes, with auto-pipelining on, all reach Redis.
 * Every test but the first runs once per client library (ioredis, node-redis, Valkey GLIDE), each with its own key
 * prefix, with the same assertions; `nodeClients` (ioredis, one per node) and `inspect` inspect the servers.
 * Failover per client library: failover.redis.spec.ts.
 */
import { Redis, type Cluster } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../../lib/interfaces/decision.interface';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { createStore } from '../../lib/pipeline/create-store';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import type { RedisClient } from '../../lib/interfaces/client-types';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { encodeTracker, trackerKeyPrefix } from '../../lib/shared/keys';
import { REDIS_CLIENTS } from '../support/redis-clients';
import { libraryCluster, startRedis, startRedisCluster, type RedisClusterProcess, type RedisProcess } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const registry = new RateLimitAlgorithmRegistry();

let cluster: RedisClusterProcess | undefined;
let standalone: RedisProcess | undefined;
/** An ioredis cluster client of the test's own, to inspect keys wherever they live. */
let inspect: Cluster | undefined;
const nodeClients: Redis[] = [];
const stores: RateLimitStore[] = [];
const storeErrors: Error[] = [];

function service(redis: RedisClient, prefix: string): RateLimiterService {
  // fail-closed with a long deadline: a fallback would show as a rejection with reason 'store-unavailable'.
  const options: RateLimitModuleOptions = {
    redis,
    prefix,
    storeTimeoutMs: 5_000,
    onStoreError: 'fail-closed',
    hooks: { storeError: (e) => storeErrors.push(e) },
  };
  const { svc, store } = serviceOver(options, registry);
  stores.push(store);
  return svc;
}

beforeAll(async () => {
  [cluster, standalone] = await Promise.all([startRedisCluster(), startRedis()]);
  inspect = await libraryCluster(cluster.startupNodes);
  for (const node of cluster.nodes) nodeClients.push(new Redis({ port: node.port, maxRetriesPerRequest: 1 }));
}, 60_000);

afterAll(async () => {
  for (const store of stores) await store.close();
  inspect?.disconnect();
  for (const c of nodeClients) c.disconnect();
  await cluster?.stop();
  await standalone?.stop();
});

afterEach(() => {
  expect(storeErrors.splice(0).map((e) => e.message)).toEqual([]);
});

/** The comparable part of a decision (retry and reset times depend on the moment, not on the topology). */
function outcome(op: string, d: RateLimitDecision): string {
  const retry = d.allowed ? '' : d.retryAfterMs === Infinity ? ' retry=never' : ' retry>0';
  return `${op}: ${d.allowed ? 'allowed' : 'rejected'} remaining=${d.remaining} limit=${d.limit}${d.reason ? ` reason=${d.reason}` : ''}${retry}`;
}

/** One algorithm through every service operation; long windows, so nothing refills in between. */
async function scenario(svc: RateLimiterService, algorithm: RateLimitAlgorithmName, tracker: string): Promise<string[]> {
  const p: RateLimitPolicy = { algorithm, limit: 5, window: '30d', name: `s-${algorithm}` };
  const out: string[] = [];
  for (const cost of [1, 1, 1, 2, 1]) out.push(outcome(`consume cost ${cost}`, await svc.consume(p, tracker, { cost })));
  out.push(outcome('peek', await svc.peek(p, tracker)));
  out.push(outcome('consume cost 100', await svc.consume(p, tracker, { cost: 100 })));
  if (algorithm === 'concurrency') {
    const leaseTracker = `${tracker}-leases`;
    const leases = [];
    for (let i = 0; i < 6; i++) leases.push(await svc.lease(p, leaseTracker));
    out.push(...leases.map((l, i) => outcome(`lease ${i}`, l.decision)));
    await leases[0].release();
    await leases[0].release();
    out.push(outcome('lease after release', (await svc.lease(p, leaseTracker)).decision));
  } else {
    await svc.refund(p, tracker, 2);
    out.push(outcome('consume after refund 2', await svc.consume(p, tracker)));
  }
  await svc.block(p, tracker, '1h');
  out.push(outcome('consume while blocked', await svc.consume(p, tracker)));
  await svc.unblock(p, tracker);
  out.push(outcome('consume after unblock', await svc.consume(p, tracker)));
  await svc.reset(p, tracker);
  out.push(outcome('consume after reset', await svc.consume(p, tracker)));
  return out;
}

const MIXED: RateLimitPolicy[] = [
  { algorithm: 'fixed-window', limit: 6, window: '30d', name: 'm-fw' },
  { algorithm: 'sliding-window', limit: 7, window: '30d', name: 'm-sw' },
  { algorithm: 'sliding-log', limit: 8, window: '30d', name: 'm-sl' },
  { algorithm: 'token-bucket', limit: 9, window: '30d', name: 'm-tb' },
  { algorithm: 'gcra', limit: 4, window: '30d', burst: 4, name: 'm-gc' },
  { algorithm: 'leaky-bucket', limit: 10, window: '30d', name: 'm-lb', delay: false },
  { algorithm: 'concurrency', limit: 11, window: '30d', name: 'm-cc' },
];

async function multiScenario(svc: RateLimiterService, tracker: string): Promise<string[]> {
  const out: string[] = [];
  for (const cost of [1, 2, 1, 1, 1, 3]) {
    const d = await svc.consumeAll(MIXED, tracker, { cost });
    out.push(`cost ${cost}: ${d.allowed ? 'allowed' : 'rejected'} | ${d.decisions.map((x) => outcome(x.policy, x)).join(' | ')}`);
  }
  return out;
}

it('the cluster is up: 3 masters, all 16384 slots assigned', async () => {
  const info = String(await nodeClients[0].cluster('INFO'));
  expect(info).toContain('cluster_state:ok');
  expect(info).toContain('cluster_slots_assigned:16384');
  expect(inspect!.nodes('master')).toHaveLength(3);
});

describe.each(REDIS_CLIENTS)('$name on a Redis Cluster (3 masters)', (kind) => {
  const PREFIX = `clu-${kind.name}`;
  const clients: RedisClient[] = [];
  let onCluster: RateLimiterService;
  let onStandalone: RateLimiterService;

  beforeAll(async () => {
    clients.push(await kind.connectCluster(cluster!.startupNodes), await kind.connect(standalone!.port));
    onCluster = service(clients[0], PREFIX);
    onStandalone = service(clients[1], PREFIX);
  }, 30_000);

  afterAll(async () => {
    for (const client of clients) await kind.close(client);
  });

  it.each(ALGORITHMS)('%s: the same outcomes as standalone, through every operation', async (algorithm) => {
    const [fromCluster, fromStandalone] = await Promise.all([
      scenario(onCluster, algorithm, 'same'),
      scenario(onStandalone, algorithm, 'same'),
    ]);
    expect(fromCluster).toEqual(fromStandalone);
    // Anchor: the first five calls (costs 1, 1, 1, 2, 1) against a limit of 5.
    expect(fromCluster.slice(0, 5).map((l) => l.replace(/ retry.*$/, ''))).toEqual([
      'consume cost 1: allowed remaining=4 limit=5',
      'consume cost 1: allowed remaining=3 limit=5',
      'consume cost 1: allowed remaining=2 limit=5',
      'consume cost 2: allowed remaining=0 limit=5',
      'consume cost 1: rejected remaining=0 limit=5',
    ]);
    expect(fromCluster).toContain('consume cost 100: rejected remaining=0 limit=5 reason=cost-exceeds-capacity retry=never');
    expect(fromCluster.some((l) => l.startsWith('consume while blocked: rejected') && l.includes('reason=blocked'))).toBe(true);
    expect(fromCluster[fromCluster.length - 1]).toBe('consume after reset: allowed remaining=4 limit=5');
  });

  it('a multi-policy route mixing all seven algorithms: the same all-or-nothing outcomes as standalone', async () => {
    const [fromCluster, fromStandalone] = await Promise.all([multiScenario(onCluster, 'multi'), multiScenario(onStandalone, 'multi')]);
    expect(fromCluster).toEqual(fromStandalone);
    // gcra (burst 4) admits costs 1 + 2 + 1, then nothing; the others were not charged for the rejections.
    expect(fromCluster.map((l) => l.split(' |')[0])).toEqual([
      'cost 1: allowed',
      'cost 2: allowed',
      'cost 1: allowed',
      'cost 1: rejected',
      'cost 1: rejected',
      'cost 3: rejected',
    ]);
    expect(fromCluster[5]).toContain('m-fw: rejected remaining=2 limit=6');
    console.log(`cluster = standalone for ${ALGORITHMS.length} algorithms and the mixed route:\n  ${fromCluster.join('\n  ')}`);
  });

  const TRICKY = [
    '{',
    '}',
    '{}',
    '}{',
    '{a}b{c}',
    'a:b',
    ':',
    'x\ny',
    '\r\n',
    'tab\there',
    '😀',
    'x'.repeat(5_000),
    `{${'k'.repeat(4_998)}}`,
    ':'.repeat(5_000),
    '\n'.repeat(5_000),
  ];

  it('trackers with {, }, :, newlines, emoji and 5,000 bytes work, and every key of one decision lies in one slot', async () => {
    const compiled = MIXED.map((p) => compilePolicy(p, registry, 'test', 'svc'));
    const engine = new RateLimitEngine(createStore({}, registry));
    const slots = new Set<number>();
    for (const tracker of TRICKY) {
      const first = await onCluster.consumeAll(MIXED, tracker);
      const second = await onCluster.consumeAll(MIXED, tracker);
      expect(first.allowed).toBe(true);
      expect(second.allowed).toBe(true);
      expect(second.decisions.map((d) => d.remaining)).toEqual(first.decisions.map((d) => d.remaining - 1));

      // The keys of this decision, as the engine names them (a service key K is the tracker by:K).
      const calls = engine.calls(
        trackerKeyPrefix(PREFIX, `by:${tracker}`),
        compiled.map((c) => ({ compiled: c, params: c.staticParams!, cost: 1 })),
      );
      const keys = calls.flatMap((c) => [c.stateKey, c.blockKey]);
      const keySlots = await Promise.all(keys.map((k) => nodeClients[0].cluster('KEYSLOT', k) as Promise<number>));
      expect(new Set(keySlots).size).toBe(1);
      expect(keySlots[0]).toBe(await nodeClients[0].cluster('KEYSLOT', `{${encodeTracker(`by:${tracker}`)}}`));
      slots.add(keySlots[0]);
      // The state keys exist (on the node that owns the slot), and carry a TTL.
      for (const c of calls) expect(await inspect!.pttl(c.stateKey)).toBeGreaterThan(0);
      expect(keys.every((k) => !k.includes('\n') && k.length < 400)).toBe(true);
    }
    // Tricky trackers do not collapse onto one slot.
    expect(slots.size).toBeGreaterThan(5);
  });

  it('50 trackers spread over the masters (keys found on at least 2 nodes)', async () => {
    const policy: RateLimitPolicy = { algorithm: 'gcra', limit: 10, window: '1h', name: 'spread' };
    for (let i = 0; i < 50; i++) expect((await onCluster.consume(policy, `spread-${i}`)).allowed).toBe(true);
    const perNode: number[] = [];
    for (const node of nodeClients) {
      let cursor = '0';
      let count = 0;
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${PREFIX}:{by%3Aspread-*}:*`, 'COUNT', 1_000);
        cursor = next;
        count += keys.length;
      } while (cursor !== '0');
      perNode.push(count);
    }
    console.log(`50 trackers on the cluster: ${perNode.join(' / ')} state keys per master`);
    expect(perNode.reduce((a, b) => a + b, 0)).toBe(50);
    expect(perNode.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
  });

  it('concurrent decisions for trackers on different nodes (auto-pipelining on) all reach Redis', async () => {
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 3, window: '30d', name: 'concurrent' };
    const multi: RateLimitPolicy[] = [policy, { algorithm: 'gcra', limit: 3, window: '30d', name: 'concurrent-2' }];
    const singles = await Promise.all(Array.from({ length: 200 }, (_, i) => onCluster.consume(policy, `par-${i % 40}`)));
    const multis = await Promise.all(Array.from({ length: 200 }, (_, i) => onCluster.consumeAll(multi, `parm-${i % 40}`)));
    expect(singles.filter((d) => d.reason === 'store-unavailable')).toHaveLength(0);
    expect(multis.filter((d) => d.decisions.some((x) => x.reason === 'store-unavailable'))).toHaveLength(0);
    // Exactly 3 per tracker, 40 trackers.
    expect(singles.filter((d) => d.allowed)).toHaveLength(120);
    expect(multis.filter((d) => d.allowed)).toHaveLength(120);
  });
});
