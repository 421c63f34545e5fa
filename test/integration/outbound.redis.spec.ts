/**
 * Outbound throttling on a real Redis and a real 3-master Redis Cluster: `pause()` and `pauseFromResponse()`
 * reach every caller through the store's lockout, `acquire()` waits in line (one store call in flight per key
 * in a process, admissions in call order), `wrapFetch()` pauses on a partner's 429 and still hands the
 * response over when the store cannot record the pause; and a partner's 429 pausing three processes.
 * Exact numbers for the same calls on the memory store: test/unit/outbound-waiters.spec.ts. Time is real
 * here, so bounds on time leave slack only on the side where a wrong answer cannot hide.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Cluster, Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitStoreError } from '../../lib/errors/rate-limit-store.error';
import { RateLimitWaitError } from '../../lib/errors/rate-limit-wait.error';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { createStore } from '../../lib/pipeline/create-store';
import type { DecisionMode, RateLimitCall, RateLimitStore } from '../../lib/stores/store.interface';
import { runOutboundWorkers } from '../support/outbound-workers';
import {
  libraryClient,
  libraryCluster,
  startRedis,
  startRedisCluster,
  type RedisClusterProcess,
  type RedisProcess,
} from '../support/redis-server';

const registry = new RateLimitAlgorithmRegistry();
/** Ten per second, a unit every 100 ms. */
const PARTNER: RateLimitPolicy = { algorithm: 'gcra', limit: 10, window: '1s', name: 'partner' };

let standalone: RedisProcess;
let cluster: RedisClusterProcess;
let redisClient: Redis;
let clusterClient: Cluster;
const stores: RateLimitStore[] = [];
let keys = 0;
const key = () => `outbound-${process.pid}-${++keys}`;

beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
  [redisClient, clusterClient] = await Promise.all([libraryClient(standalone.url), libraryCluster(cluster.startupNodes)]);
}, 60_000);

afterAll(async () => {
  for (const store of stores) await store.close();
  redisClient?.disconnect();
  clusterClient?.disconnect();
  await Promise.all([standalone?.stop(), cluster?.stop()]);
});

/**
 * A service on the module's store (shedding over resilient over Redis). fail-closed with a long deadline by
 * default, so a fallback shows as a rejection; `inFlight` is the most store decisions of one key in flight at once.
 */
function service(redis: Redis | Cluster, options: Partial<RateLimitModuleOptions> = {}) {
  const all: RateLimitModuleOptions = { redis, prefix: `ob${keys}`, storeTimeoutMs: 5_000, onStoreError: 'fail-closed', ...options };
  const store = createStore(all, registry);
  stores.push(store);
  const watch = { inFlight: 0, most: 0, grants: [] as number[] };
  const decide = store.decide.bind(store);
  store.decide = async (calls: readonly RateLimitCall[], mode: DecisionMode) => {
    watch.most = Math.max(watch.most, ++watch.inFlight);
    try {
      const result = await decide(calls, mode);
      if (mode === 'consume' && result.allowed) watch.grants.push(result.nowMs);
      return result;
    } finally {
      watch.inFlight--;
    }
  };
  return { limiter: new RateLimiterService(new RateLimitEngine(store, all), registry, all), watch };
}

describe.each([
  ['Redis', () => redisClient],
  ['Redis Cluster', () => clusterClient],
] as const)('outbound on %s', (_, client) => {
  it('pause: every call is rejected until it ends on the store clock; acquire waits for it, or is told at once', async () => {
    const { limiter } = service(client());
    const k = key();
    const started = performance.now();
    expect(await limiter.pause(PARTNER, k, 1_500)).toBe(1_500);
    const rejected = await limiter.consume(PARTNER, k);
    const elapsed = performance.now() - started;
    expect(rejected).toMatchObject({ allowed: false, reason: 'blocked' });
    expect(rejected.retryAfterMs).toBeLessThanOrEqual(1_500);
    expect(rejected.retryAfterMs).toBeGreaterThanOrEqual(1_500 - Math.ceil(elapsed) - 1);

    const asked = performance.now();
    const tooLong = await limiter.acquire(PARTNER, k, { maxWaitMs: 500 }).catch((e: RateLimitWaitError) => e);
    expect(tooLong).toBeInstanceOf(RateLimitWaitError);
    expect((tooLong as RateLimitWaitError).retryAfterMs).toBeGreaterThan(500);
    // Told after one store round trip, not after waiting.
    expect(performance.now() - asked).toBeLessThan(250);

    const granted = await limiter.acquire(PARTNER, k, { maxWaitMs: 5_000 });
    expect(granted.allowed).toBe(true);
    // Not before the pause's end (Redis TIME and performance.now() tick on one machine: 2 ms of rounding).
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_500 - 2);
  });

  it('pause never shortens a longer one in force, and takes a date on the store clock', async () => {
    const { limiter } = service(client());
    const k = key();
    await limiter.pause(PARTNER, k, '3s');
    await limiter.pause(PARTNER, k, '1s');
    expect((await limiter.peek(PARTNER, k)).retryAfterMs).toBeGreaterThan(2_500);
    const other = key();
    const ms = await limiter.pause(PARTNER, other, new Date(Date.now() + 1_200));
    expect(ms).toBeGreaterThan(1_100);
    expect(ms).toBeLessThanOrEqual(1_201);
    expect(await limiter.pause(PARTNER, key(), new Date(Date.now() - 10))).toBe(0);
  });

  it('acquire: calls of one process wait in line: one store call in flight, admitted in call order at the policy pace', async () => {
    const { limiter, watch } = service(client());
    const k = key();
    const slow: RateLimitPolicy = { algorithm: 'gcra', limit: 5, window: '1s', burst: 1, name: 'slow' };
    const order: number[] = [];
    await Promise.all(Array.from({ length: 5 }, (_, i) => limiter.acquire(slow, k, { maxWaitMs: 5_000 }).then(() => order.push(i))));
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(watch.most).toBe(1);
    // One unit every 200 ms on the store's clock, exactly: gcra admits no sooner.
    expect(watch.grants).toHaveLength(5);
    for (let i = 1; i < 5; i++) expect(watch.grants[i] - watch.grants[i - 1]).toBeGreaterThanOrEqual(200);
    expect(watch.grants[4] - watch.grants[0]).toBeLessThan(800 + 500);
  });

  it('wrapFetch: a 429 with Retry-After pauses the next call for that long', async () => {
    const { limiter } = service(client());
    let n = 0;
    const partnerFetch = limiter.wrapFetch(PARTNER, key(), async () =>
      ++n === 1 ? new Response(null, { status: 429, headers: { 'Retry-After': '1' } }) : new Response('ok'),
    );
    const started = performance.now();
    expect((await partnerFetch()).status).toBe(429);
    expect((await partnerFetch()).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_000 - 2);
  });
});

describe('outbound when the store does not answer', () => {
  it('wrapFetch hands the partner’s response over, and reports the pause it could not record', async () => {
    const errors: Error[] = [];
    const { limiter } = service(redisClient, {
      storeTimeoutMs: 100,
      onStoreError: 'fail-open',
      hooks: { storeError: (e) => errors.push(e) },
    });
    const partnerFetch = limiter.wrapFetch(PARTNER, key(), async () => {
      standalone.pause();
      return new Response(null, { status: 429, headers: { 'Retry-After': '30' } });
    });
    try {
      expect((await partnerFetch()).status).toBe(429);
    } finally {
      standalone.resume();
    }
    expect(errors.map((e) => [e.constructor, e.message])).toEqual([
      [RateLimitStoreError, 'The rate-limit store did not answer within storeTimeoutMs (100 ms).'],
    ]);
  });
});

describe('three processes on one Redis', () => {
  /** A partner allowing everything but its 5th request, which gets a 429 with `Retry-After: 1`. */
  async function partner(): Promise<{ server: Server; url: string; arrivals: Array<{ at: number; worker: string; status: number }> }> {
    const arrivals: Array<{ at: number; worker: string; status: number }> = [];
    const server = createServer((req, res) => {
      const status = arrivals.length === 4 ? 429 : 200;
      arrivals.push({ at: Date.now(), worker: String(req.headers['x-worker']), status });
      res.writeHead(status, status === 429 ? { 'Retry-After': '1' } : { 'Content-Type': 'application/json' });
      res.end(status === 429 ? '' : '{"price":100}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/quote`, arrivals };
  }

  it('a partner 429 pauses all three: no grant anywhere until its Retry-After has passed, then all three go on', async () => {
    const { server, url, arrivals } = await partner();
    try {
      const base = { REDIS_PORT: String(standalone.port), PREFIX: `ob3-${process.pid}`, ALGORITHM: 'gcra', LIMIT: '10', WINDOW_MS: '1000' };
      const reports = await runOutboundWorkers(
        ['a', 'b', 'c'].map((worker) => ({ ...base, CALLS: '10', MAX_WAIT_MS: '20000', MODE: 'fetch', PARTNER_URL: url, WORKER: worker })),
      );
      // Every call went through, one of them answered 429; exactly one process saw it and paused the key.
      expect(reports.flatMap((r) => r.calls.map((c) => c.outcome))).toEqual(Array(30).fill('granted'));
      expect(arrivals.map((a) => a.status).filter((s) => s === 429)).toHaveLength(1);
      const pauses = reports.flatMap((r) => r.pausesUntil);
      expect(pauses).toHaveLength(1);
      const [until] = pauses;
      const grants = reports.map((r) => r.grants);
      const all = grants.flat().sort((a, b) => a - b);
      console.log(
        `partner 429: pause until ${until}; grants (ms from the first): ${all.map((g) => g - all[0]).join(' ')}; pause ${until - 1_000 - all[0]}-${until - all[0]}`,
      );
      // The pause is 1 s (Retry-After: 1) on the store's clock: no process was granted anything within it
      // (after its first millisecond: a grant Redis decided just before the pause was written can be
      // stamped with that same millisecond by its process's clock)...
      expect(all.filter((g) => g > until - 1_000 && g < until)).toEqual([]);
      // ...though calls were waiting all along: every process was granted calls after it.
      for (const own of grants) expect(own.filter((g) => g >= until).length).toBeGreaterThan(0);
      // The pause began once the 429 had been answered (same machine: one clock).
      const answered = arrivals.find((a) => a.status === 429)!.at;
      expect(until - 1_000).toBeGreaterThanOrEqual(answered - 1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  }, 60_000);

  it('three processes × 15 acquire calls: the quota holds, no grant waited past maxWaitMs, every rejection before it', async () => {
    const base = { REDIS_PORT: String(standalone.port), PREFIX: `ob3a-${process.pid}`, ALGORITHM: 'gcra', LIMIT: '10', WINDOW_MS: '1000' };
    const reports = await runOutboundWorkers(Array.from({ length: 3 }, () => ({ ...base, CALLS: '15', MAX_WAIT_MS: '2000' })));
    const all = reports.flatMap((r) => r.grants).sort((a, b) => a - b);
    // gcra, 10 per second with a burst of 10: the k-th grant after the 10th comes no sooner than k × 100 ms.
    for (let i = 10; i < all.length; i++) expect(all[i] - all[0]).toBeGreaterThanOrEqual((i - 9) * 100);
    const calls = reports.flatMap((r) => r.calls);
    const granted = calls.filter((c) => c.outcome === 'granted');
    const rejected = calls.filter((c) => c.outcome !== 'granted');
    expect(granted.length + rejected.length).toBe(45);
    expect(rejected.map((c) => c.outcome)).toEqual(rejected.map(() => 'RateLimitWaitError'));
    // 10 at once, then at most one per 100 ms for 2 s: no more than 30 can be granted in time.
    expect(granted.length).toBeLessThanOrEqual(31);
    for (const c of [...granted, ...rejected]) expect(c.ms).toBeLessThan(2_000 + 150);
    console.log(
      `3 × 15 acquire, maxWaitMs 2000: granted per process ${reports.map((r) => r.calls.filter((c) => c.outcome === 'granted').length).join(' / ')}; ` +
        `longest grant wait ${Math.max(...granted.map((c) => c.ms)).toFixed(0)} ms; rejections after ${rejected.map((c) => c.ms.toFixed(0)).join(', ')} ms`,
    );
  }, 60_000);
});
