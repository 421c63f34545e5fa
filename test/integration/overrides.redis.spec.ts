/**
 * Runtime overrides (issue #31), end to end over HTTP with exact counts: Nest apps ("instances") sharing one
 * real redis-server, one real 3-master Redis Cluster, or each its own memory store. A policy `api` (fixed-window,
 * 2 per minute, `by` the `x-tenant` header):
 *  - `setOverride('api', 'acme', { limit: 5 })` on instance A: instance B admits acme exactly 5 (its
 *    `RateLimit-Policy` says `q=5`) and other tenants still 2; B applies it by the first poll it sends after the
 *    write resolved (the poll interval is 500 ms, so within 1 s; each measured delay is printed);
 *  - `gold-*` with limit 4: `gold-1` gets 4, and an exact override (`gold-vip`, 6) beats it;
 *  - `removeOverride`: back to 2 (what acme already counted carries over: it stays rejected, now at `q=2`);
 *  - `until` 2 s ahead: 5 while it lasts, 2 after it;
 *  - an instance started after the call applies it from its first request;
 *  - `listOverrides` returns what is set.
 * Then the same for every counting algorithm (fixed-window, sliding-window, sliding-log, token-bucket, gcra,
 * leaky-bucket) on each backend, and, on the memory store: the service path, a built-in `ip:` tracker (the
 * guard's path without a `by` function), and a limit function the override replaces (not called).
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import request from 'supertest';
import {
  RateLimit,
  RateLimitAdmin,
  RateLimitModule,
  RateLimiterService,
  type RateLimitAlgorithmName,
  type RateLimitOverrideEvent,
  type RateLimitPolicy,
} from '../../lib';
import { OVERRIDE_POLL_MS } from '../../lib/pipeline/override-sync';
import { RATE_LIMIT_STORE } from '../../lib/rate-limit.module-definition';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { bootApp, clearOfMinuteEnd, sleep } from '../e2e/harness';
import { fieldMembers } from '../support/rate-limit-fields';
import {
  libraryClient,
  libraryCluster,
  startRedis,
  startRedisCluster,
  type RedisClusterProcess,
  type RedisProcess,
} from '../support/redis-server';

type Backend = 'memory' | 'redis' | 'cluster';
const COUNTING: RateLimitAlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra', 'leaky-bucket'];

let server: RedisProcess | undefined;
let cluster: RedisClusterProcess | undefined;
const clients: Array<Redis | Cluster> = [];
const apps: INestApplication[] = [];
/** Each propagation measured: how long B took to apply a change after A's call resolved, and B's polls in between. */
const delays: string[] = [];
let prefixes = 0;

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedis(), startRedisCluster(3)]);
}, 60_000);

afterAll(async () => {
  for (const app of apps) await app.close();
  for (const client of clients) client.disconnect();
  await cluster?.stop();
  await server?.stop();
  if (delays.length > 0)
    process.stdout.write(`runtime override propagation (B applied it after A's call resolved):\n  ${delays.join('\n  ')}\n`);
}, 30_000);

/** The `api` policy of the issue on `algorithm`: 2 per minute (a bucket: per hour, so nothing refills mid-test), by tenant. */
function apiPolicy(algorithm: RateLimitAlgorithmName): RateLimitPolicy {
  return {
    name: 'api',
    algorithm,
    limit: 2,
    window: algorithm === 'fixed-window' ? '1m' : '1h',
    by: (ctx) => ctx.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-tenant'],
    // A leaky bucket would hold the second request for half the window: a pure meter counts the same.
    ...(algorithm === 'leaky-bucket' ? { delay: false } : {}),
  };
}

function apiController(policy: RateLimitPolicy) {
  @Controller('api')
  @RateLimit(policy)
  class ApiController {
    @Get()
    get() {
      return 'ok';
    }
  }
  return ApiController;
}

/** One instance: a Nest app on `backend` under `prefix`, recording the override changes it applies. */
interface Instance {
  app: INestApplication;
  admin: RateLimitAdmin;
  /** Override events, each with the time it happened (`Date.now()`). */
  events: Array<RateLimitOverrideEvent & { at: number }>;
  /** When each poll (a read of the overrides) was sent. */
  reads: number[];
}

async function instance(
  backend: Backend,
  prefix: string,
  policy: RateLimitPolicy,
  controllers: Array<new () => unknown> = [],
): Promise<Instance> {
  let redis: Redis | Cluster | undefined;
  if (backend === 'redis') redis = await libraryClient(server!.url);
  if (backend === 'cluster') redis = await libraryCluster(cluster!.startupNodes);
  if (redis) clients.push(redis);
  const events: Instance['events'] = [];
  const app = await bootApp({
    adapter: 'express',
    imports: [
      RateLimitModule.forRoot({
        redis,
        prefix,
        storeTimeoutMs: 5_000,
        hooks: { override: (event) => events.push({ ...event, at: Date.now() }) },
      }),
    ],
    controllers: [apiController(policy), ...controllers],
  });
  apps.push(app);
  const reads: number[] = [];
  const store = app.get<RateLimitStore>(RATE_LIMIT_STORE);
  const read = store.readOverrides!.bind(store);
  store.readOverrides = (...args) => {
    reads.push(Date.now());
    return read(...args);
  };
  return { app, admin: app.get(RateLimitAdmin), events, reads };
}

/** Polls `check` every 20 ms until it holds; fails after `timeoutMs` (generous: the machine may be busy). */
async function until(check: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await sleep(20);
  }
}

/**
 * Requests `tenant` sends to `app` until one is rejected (at most 20): how many were admitted, and the `q` of
 * the `RateLimit-Policy` of the first response.
 */
async function admitted(app: INestApplication, tenant: string): Promise<{ admitted: number; q: number }> {
  let count = 0;
  let q: number | undefined;
  for (let i = 0; i < 20; i++) {
    const res = await request(app.getHttpServer()).get('/api').set('x-tenant', tenant);
    q ??= Number(fieldMembers(res.headers['ratelimit-policy'])![0].q);
    if (res.status === 429) break;
    expect(res.status).toBe(200);
    count++;
  }
  return { admitted: count, q: q! };
}

/**
 * Runs `change` on A and waits for B to apply it (`action` on `tracker`): the delay from the call's
 * resolution, and how many polls B sent after it, are recorded. The first poll sent after the write sees the
 * moved version, so B applies it by that poll at the latest: at most one poll after the call.
 */
async function propagated(
  a: Instance,
  b: Instance,
  change: () => Promise<void>,
  action: RateLimitOverrideEvent['action'],
  tracker: string,
  label: string,
): Promise<void> {
  const seen = b.events.length;
  await change();
  const done = Date.now();
  if (a === b) return;
  await until(() => b.events.slice(seen).some((e) => e.action === action && e.tracker === tracker), `${label}: B ${action} ${tracker}`);
  const event = b.events.slice(seen).find((e) => e.action === action && e.tracker === tracker)!;
  const pollsAfter = b.reads.filter((at) => at >= done && at <= event.at).length;
  delays.push(`${label}: ${action} ${tracker} after ${event.at - done} ms (${pollsAfter} poll(s) of B sent after the call)`);
  expect(event.local).toBe(false);
  expect(pollsAfter).toBeLessThanOrEqual(1);
}

it('polls every 500 ms, so a change is applied everywhere within 1 s', () => {
  expect(OVERRIDE_POLL_MS).toBe(500);
});

describe.each<Backend>(['redis', 'cluster', 'memory'])('on %s', (backend) => {
  const twoInstances = backend !== 'memory';
  let prefix: string;
  let a: Instance;
  let b: Instance;

  beforeAll(async () => {
    prefix = `ov${process.pid}-${++prefixes}`;
    a = await instance(backend, prefix, apiPolicy('fixed-window'));
    // On the memory store each app has its own store: one instance plays both parts.
    b = twoInstances ? await instance(backend, prefix, apiPolicy('fixed-window')) : a;
  }, 30_000);

  it('setOverride on one instance: the other admits acme 5 per minute (q=5), others still 2', async () => {
    // acme's count must stay in one minute until the removal test reads it again.
    await clearOfMinuteEnd(20_000);
    await propagated(a, b, () => a.admin.setOverride('api', 'acme', { limit: 5 }), 'applied', 'acme', `${backend} acme`);
    expect(await admitted(b.app, 'acme')).toEqual({ admitted: 5, q: 5 });
    expect(await admitted(b.app, 'globex')).toEqual({ admitted: 2, q: 2 });
    // A applies it too (at once: its own call), on the same counter.
    expect(await admitted(a.app, 'acme')).toEqual({ admitted: 0, q: 5 });
    expect(a.events.filter((e) => e.tracker === 'acme')).toEqual([
      expect.objectContaining({ action: 'applied', policy: 'api', tracker: 'acme', override: { limit: 5 }, local: true }),
    ]);
  });

  it("'gold-*' with limit 4: gold-1 gets 4, and an exact override beats it", async () => {
    await clearOfMinuteEnd();
    await propagated(a, b, () => a.admin.setOverride('api', 'gold-*', { limit: 4 }), 'applied', 'gold-*', `${backend} gold-*`);
    await propagated(a, b, () => a.admin.setOverride('api', 'gold-vip', { limit: 6 }), 'applied', 'gold-vip', `${backend} gold-vip`);
    expect(await admitted(b.app, 'gold-1')).toEqual({ admitted: 4, q: 4 });
    expect(await admitted(b.app, 'gold-vip')).toEqual({ admitted: 6, q: 6 });
    expect(await admitted(b.app, 'silver-1')).toEqual({ admitted: 2, q: 2 });
  });

  it('listOverrides returns what is set, on every instance', async () => {
    const expected = [
      { policy: 'api', tracker: 'acme', override: { limit: 5 } },
      { policy: 'api', tracker: 'gold-*', override: { limit: 4 } },
      { policy: 'api', tracker: 'gold-vip', override: { limit: 6 } },
    ];
    expect(await a.admin.listOverrides()).toEqual(expected);
    expect(await b.admin.listOverrides('api')).toEqual(expected);
    expect(await b.app.get(RateLimiterService).listOverrides('other')).toEqual([]);
  });

  it('removeOverride: back to 2 within 1 s (what acme counted carries over)', async () => {
    await clearOfMinuteEnd();
    await propagated(a, b, () => a.admin.removeOverride('api', 'gold-*'), 'removed', 'gold-*', `${backend} gold-*`);
    expect(await admitted(b.app, 'gold-2')).toEqual({ admitted: 2, q: 2 });
    // 'by:acme' names the same override as 'acme'.
    await propagated(a, b, () => a.admin.removeOverride('api', 'by:acme'), 'removed', 'acme', `${backend} acme`);
    // Still in the minute acme spent 5 in: 5 counted ≥ 2, so rejected at once, now stating q=2.
    expect(await admitted(b.app, 'acme')).toEqual({ admitted: 0, q: 2 });
    expect((await b.admin.listOverrides()).map((o) => o.tracker)).toEqual(['gold-vip']);
  });

  it('until 2 s ahead: 5 while it lasts, back to 2 after it', async () => {
    await clearOfMinuteEnd(10_000);
    const ends = Date.now() + 2_000;
    await propagated(
      a,
      b,
      () => a.admin.setOverride('api', 'temp-*', { limit: 5 }, { until: ends }),
      'applied',
      'temp-*',
      `${backend} temp-*`,
    );
    expect(await admitted(b.app, 'temp-1')).toEqual({ admitted: 5, q: 5 });
    expect((await a.admin.listOverrides()).find((o) => o.tracker === 'temp-*')).toEqual({
      policy: 'api',
      tracker: 'temp-*',
      override: { limit: 5 },
      until: ends,
    });
    // A remote store's instances see the end at their next poll; the memory store (no timer) at the next decision.
    if (twoInstances)
      await until(() => b.events.some((e) => e.action === 'expired' && e.tracker === 'temp-*'), `${backend}: B expired temp-*`);
    else await until(() => Date.now() > ends, 'the end of temp-*');
    expect(await admitted(b.app, 'temp-2')).toEqual({ admitted: 2, q: 2 });
    expect(b.events.filter((e) => e.tracker === 'temp-*').map((e) => e.action)).toEqual(['applied', 'expired']);
    expect((await a.admin.listOverrides()).map((o) => o.tracker)).toEqual(['gold-vip']);
  });

  if (twoInstances) {
    it('an instance started after the call applies it from its first request', async () => {
      await clearOfMinuteEnd();
      await a.admin.setOverride('api', 'late', { limit: 3 });
      const c = await instance(backend, prefix, apiPolicy('fixed-window'));
      expect(await admitted(c.app, 'late')).toEqual({ admitted: 3, q: 3 });
      // Loaded at startup: no event for what was already set.
      expect(c.events).toEqual([]);
    });
  }

  describe.each(COUNTING)('%s', (algorithm) => {
    it('exact, prefix and removal give exact counts on every instance', async () => {
      const own = `${prefix}-${algorithm}`;
      const x = await instance(backend, own, apiPolicy(algorithm));
      const y = twoInstances ? await instance(backend, own, apiPolicy(algorithm)) : x;
      if (algorithm === 'fixed-window') await clearOfMinuteEnd();
      await propagated(x, y, () => x.admin.setOverride('api', 'acme', { limit: 5 }), 'applied', 'acme', `${backend} ${algorithm} acme`);
      await propagated(
        x,
        y,
        () => x.admin.setOverride('api', 'gold-*', { limit: 4 }),
        'applied',
        'gold-*',
        `${backend} ${algorithm} gold-*`,
      );
      await propagated(
        x,
        y,
        () => x.admin.setOverride('api', 'gold-vip', { limit: 6 }),
        'applied',
        'gold-vip',
        `${backend} ${algorithm} gold-vip`,
      );
      expect({
        acme: await admitted(y.app, 'acme'),
        gold1: await admitted(y.app, 'gold-1'),
        vip: await admitted(y.app, 'gold-vip'),
        other: await admitted(y.app, 'other'),
      }).toEqual({ acme: { admitted: 5, q: 5 }, gold1: { admitted: 4, q: 4 }, vip: { admitted: 6, q: 6 }, other: { admitted: 2, q: 2 } });
      await propagated(x, y, () => x.admin.removeOverride('api', 'gold-*'), 'removed', 'gold-*', `${backend} ${algorithm} gold-*`);
      expect(await admitted(y.app, 'gold-2')).toEqual({ admitted: 2, q: 2 });
      expect((await y.admin.listOverrides('api')).map((o) => `${o.tracker}=${o.override.limit}`)).toEqual(['acme=5', 'gold-vip=6']);
    }, 60_000);
  });
});

describe('on the memory store', () => {
  it('RateLimiterService calls, a built-in ip: tracker and a limit function the override replaces', async () => {
    let limitCalls = 0;
    const dynamic: RateLimitPolicy = {
      name: 'dyn',
      algorithm: 'sliding-log',
      limit: () => (limitCalls++, 2),
      window: '1h',
      by: (ctx) => ctx.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-tenant'],
    };
    @Controller('more')
    class MoreController {
      @Get('ip')
      @RateLimit({ name: 'perip', algorithm: 'gcra', limit: 2, window: '1h' })
      ip() {
        return 'ok';
      }

      @Get('dyn')
      @RateLimit(dynamic)
      dyn() {
        return 'ok';
      }
    }
    const one = await instance('memory', `ov${process.pid}-more`, apiPolicy('fixed-window'), [MoreController]);
    const limiter = one.app.get(RateLimiterService);
    const send = async (path: string, tenant?: string) => {
      let count = 0;
      for (let i = 0; i < 20; i++) {
        const req = request(one.app.getHttpServer()).get(path);
        const res = await (tenant ? req.set('x-tenant', tenant) : req);
        if (res.status === 429) return { count, q: Number(fieldMembers(res.headers['ratelimit-policy'])![0].q) };
        count++;
      }
      return { count, q: NaN };
    };

    await limiter.setOverride('perip', 'ip:127.0.0.1', { limit: 3 });
    expect(await send('/more/ip')).toEqual({ count: 3, q: 3 });

    await one.admin.setOverride('dyn', 'acme', { limit: 4 });
    expect(await send('/more/dyn', 'acme')).toEqual({ count: 4, q: 4 });
    expect(limitCalls).toBe(0);
    expect(await send('/more/dyn', 'other')).toEqual({ count: 2, q: 2 });
    expect(limitCalls).toBe(3);

    // The service path: a policy named 'api' used with RateLimiterService meets the overrides of 'api'.
    await clearOfMinuteEnd();
    await one.admin.setOverride('api', 'svc-*', { limit: 3 });
    const policy: RateLimitPolicy = { name: 'api', algorithm: 'fixed-window', limit: 2, window: '1m' };
    const outcomes = [];
    for (let i = 0; i < 4; i++) outcomes.push(await limiter.consume(policy, 'svc-1'));
    expect(outcomes.map((d) => `${d.allowed ? 'allowed' : 'rejected'} ${d.remaining}/${d.limit}`)).toEqual([
      'allowed 2/3',
      'allowed 1/3',
      'allowed 0/3',
      'rejected 0/3',
    ]);
    expect((await limiter.consume(policy, 'svc')).limit).toBe(2);
  });
});
