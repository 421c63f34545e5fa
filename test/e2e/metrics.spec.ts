import { Controller, Get, Res, type INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import { Registry, register } from 'prom-client';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { RateLimitMetrics, RateLimitPrometheusModule } from '../../lib/prometheus';
import { AppModule } from '../../sample/app.module';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { ADAPTERS, bootApp, type AdapterName } from './harness';

@Controller()
class SequenceController {
  @Get('limited')
  @RateLimit({ name: 'burst', algorithm: 'fixed-window', limit: 3, window: '1h' })
  limited() {
    return 'limited';
  }

  /** 'current' enforces 5 per minute while 'next' (1 per minute) only reports. */
  @Get('shadowed')
  @RateLimit([
    { name: 'current', algorithm: 'fixed-window', limit: 5, window: '1h' },
    { name: 'next', algorithm: 'fixed-window', limit: 1, window: '1h', mode: 'shadow' },
  ])
  shadowed() {
    return 'shadowed';
  }

  /** No policy, no defaultPolicy: never decided, never counted. */
  @Get('free')
  free() {
    return 'free';
  }
}

/** A `/metrics` route as an app would write it (Express `res.header` and Fastify `reply.header` alike). */
@Controller()
class MetricsController {
  constructor(private readonly rateLimitMetrics: RateLimitMetrics) {}

  @Get('metrics')
  async metrics(@Res({ passthrough: true }) res: { header(name: string, value: string): unknown }): Promise<string> {
    res.header('Content-Type', this.rateLimitMetrics.contentType);
    return this.rateLimitMetrics.metrics();
  }
}

/** The known sequence: /limited ×5 (3 allowed, 2 rejected), /shadowed ×3 (allowed; 'next' rejects 2 in shadow), /free ×2. */
async function runSequence(app: INestApplication): Promise<number[]> {
  const statuses: number[] = [];
  for (const path of [
    '/limited',
    '/limited',
    '/limited',
    '/limited',
    '/limited',
    '/shadowed',
    '/shadowed',
    '/shadowed',
    '/free',
    '/free',
  ]) {
    statuses.push((await request(app.getHttpServer()).get(path)).status);
  }
  return statuses;
}
const SEQUENCE_STATUSES = [200, 200, 200, 429, 429, 200, 200, 200, 200, 200];

/** Prometheus text exposition as { 'name{labels}': value }, for the series whose name starts with `prefix`. */
function parseExposition(text: string, prefix: string): Record<string, number> {
  const series: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const at = line.lastIndexOf(' ');
    series[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return series;
}

/** Counters and histogram counts only (bucket boundaries and sums depend on timing). */
function countsOf(series: Record<string, number>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(series).filter(([name]) => !name.includes('_bucket{') && !name.includes('_sum') && !TIMING.test(name)),
  );
}

/** The store-latency and event-loop-delay gauges: their values depend on the machine, their series do not. */
const TIMING = /^rate_limit_(store_latency|event_loop_delay)_seconds\{/;
function timingsOf(series: Record<string, number>): string[] {
  return Object.keys(series).filter((name) => TIMING.test(name));
}

let redis: RedisProcess;
let admin: Redis;
beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
  await admin.ping();
});
afterAll(async () => {
  await admin.quit();
  await redis.stop();
});

let prefixes = 0;
/** An app on its own connection (connected before it boots), with or without the Prometheus module. */
async function boot(adapter: AdapterName, metrics: { registry?: Registry } | false, extra: RateLimitModuleOptions = {}) {
  const client = new Redis(redis.url);
  await client.ping();
  const app = await bootApp({
    adapter,
    imports: [
      RateLimitModule.forRoot({ redis: client, prefix: `metrics${++prefixes}`, ...extra }),
      ...(metrics ? [RateLimitPrometheusModule.forRoot(metrics)] : []),
    ],
    controllers: metrics ? [SequenceController, MetricsController] : [SequenceController],
  });
  return {
    app,
    client,
    close: async () => {
      await app.close();
      client.disconnect();
    },
  };
}

describe.each(ADAPTERS)('Prometheus metrics on %s with the Redis store', (adapter) => {
  it('/metrics shows exact counts per policy and one histogram observation per decision after a known sequence', async () => {
    const registry = new Registry();
    const { app, close } = await boot(adapter, { registry });
    try {
      expect(await runSequence(app)).toEqual(SEQUENCE_STATUSES);

      const scrape = await request(app.getHttpServer()).get('/metrics');
      expect(scrape.status).toBe(200);
      expect(scrape.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
      const series = parseExposition(scrape.text, 'rate_limit_');
      expect(timingsOf(series)).toEqual(
        ['store_latency', 'event_loop_delay'].flatMap((m) => ['0.5', '0.99', '1'].map((q) => `rate_limit_${m}_seconds{quantile="${q}"}`)),
      );
      expect(Object.entries(series).filter(([name]) => TIMING.test(name) && !(series[name] >= 0 && series[name] < 60))).toEqual([]);
      expect(series['rate_limit_store_latency_seconds{quantile="1"}']).toBeGreaterThan(0);
      expect(countsOf(series)).toEqual({
        'rate_limit_allowed_total{policy="burst",reason="counter"}': 3,
        'rate_limit_rejected_total{policy="burst",reason="counter"}': 2,
        'rate_limit_allowed_total{policy="current",reason="counter"}': 3,
        'rate_limit_allowed_total{policy="next",reason="counter"}': 1,
        'rate_limit_rejected_total{policy="next",reason="shadow"}': 2,
        // The default nearLimitRatio 0.1: the decisions that took the last unit of 'burst' (3) and 'next' (1).
        'rate_limit_near_limit_total{policy="burst"}': 1,
        'rate_limit_near_limit_total{policy="next"}': 1,
        rate_limit_store_errors_total: 0,
        'rate_limit_decision_duration_seconds_count{outcome="allowed"}': 6,
        'rate_limit_decision_duration_seconds_count{outcome="rejected"}': 2,
      });
      // 8 decisions (one per limited request): the +Inf buckets hold them all, the sums are latencies.
      expect(series['rate_limit_decision_duration_seconds_bucket{le="+Inf",outcome="allowed"}']).toBe(6);
      expect(series['rate_limit_decision_duration_seconds_bucket{le="+Inf",outcome="rejected"}']).toBe(2);
      const sum = series['rate_limit_decision_duration_seconds_sum{outcome="allowed"}'];
      expect(sum).toBeGreaterThan(0);
      expect(sum).toBeLessThan(6 * 0.1); // each within the default 100 ms store deadline
    } finally {
      await close();
    }
  });
});

describe('Prometheus metrics and Redis', () => {
  /** `INFO commandstats` as { command: calls }. */
  async function commandCalls(): Promise<Record<string, number>> {
    const info = await admin.info('commandstats');
    return Object.fromEntries([...info.matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)].map(([, name, calls]) => [name, Number(calls)]));
  }

  /** Runs the sequence on a cold script cache with fresh stats, and returns the commands Redis counted. */
  async function commandsOfSequence(metrics: boolean): Promise<Record<string, number>> {
    const { app, close } = await boot('express', metrics ? { registry: new Registry() } : false);
    try {
      await admin.script('FLUSH');
      await admin.config('RESETSTAT');
      expect(await runSequence(app)).toEqual(SEQUENCE_STATUSES);
      if (metrics) expect((await request(app.getHttpServer()).get('/metrics')).status).toBe(200);
      return await commandCalls();
    } finally {
      await close();
    }
  }

  it('the same sequence sends exactly the same commands with metrics on (and a scrape) as without', async () => {
    const without = await commandsOfSequence(false);
    const withMetrics = await commandsOfSequence(true);
    expect(withMetrics).toEqual(without);
    // Redis did decide, reading its clock 3 times: /limited 4 times alone (the 5th was shed locally), a
    // fixed-window of an hour reading the clock on its window's first hit only (1); /shadowed's enforced and
    // shadow parts are two decisions made in one tick, which share a call of decide.lua (one TIME each, 2),
    // and the 3rd request's enforced part goes alone (its shadow rejection was shed), its window begun (0).
    expect(without.time).toBe(3);
  });

  it('counts store errors, and fail-open decisions under reason store-unavailable', async () => {
    const registry = new Registry();
    const down = await startRedis();
    const client = new Redis(down.url, { maxRetriesPerRequest: 0 });
    client.on('error', () => undefined); // the server is stopped on purpose
    await client.ping();
    const app = await bootApp({
      adapter: 'express',
      imports: [
        RateLimitModule.forRoot({ redis: client, storeTimeoutMs: 50, onStoreError: 'fail-open' }),
        RateLimitPrometheusModule.forRoot({ registry }),
      ],
      controllers: [SequenceController, MetricsController],
    });
    try {
      await down.stop();
      // The first failure opens the circuit for 250 ms: the second request is decided without trying Redis.
      expect([
        (await request(app.getHttpServer()).get('/limited')).status,
        (await request(app.getHttpServer()).get('/limited')).status,
      ]).toEqual([200, 200]);
      const series = parseExposition((await request(app.getHttpServer()).get('/metrics')).text, 'rate_limit_');
      expect(countsOf(series)).toEqual({
        'rate_limit_allowed_total{policy="burst",reason="store-unavailable"}': 2,
        rate_limit_store_errors_total: 1,
        'rate_limit_decision_duration_seconds_count{outcome="allowed"}': 2,
      });
    } finally {
      await app.close();
      client.disconnect();
    }
  });
});

describe('Prometheus metrics in the default registry', () => {
  it("registers in prom-client's global registry by default, and removes its metrics when the app closes", async () => {
    const { app, close } = await boot('fastify', {});
    let closed = false;
    try {
      await request(app.getHttpServer()).get('/limited');
      expect(await register.getSingleMetricAsString('rate_limit_allowed_total')).toContain(
        'rate_limit_allowed_total{policy="burst",reason="counter"} 1',
      );
      await close();
      closed = true;
      expect(register.getSingleMetric('rate_limit_allowed_total')).toBeUndefined();
      expect(register.getSingleMetric('rate_limit_decision_duration_seconds')).toBeUndefined();
    } finally {
      if (!closed) await close();
    }
  });

  it('two apps in one process add up in one registry; a prefix keeps them apart', async () => {
    const registry = new Registry();
    const a = await boot('express', { registry });
    const b = await boot('express', { registry });
    const c = await bootApp({
      adapter: 'express',
      imports: [RateLimitModule.forRoot({}), RateLimitPrometheusModule.forRoot({ registry, prefix: 'other_' })],
      controllers: [SequenceController],
    });
    try {
      for (const app of [a.app, b.app, c]) await request(app.getHttpServer()).get('/limited');
      const text = await registry.metrics();
      expect(parseExposition(text, 'rate_limit_allowed_total')).toEqual({ 'rate_limit_allowed_total{policy="burst",reason="counter"}': 2 });
      expect(parseExposition(text, 'other_allowed_total')).toEqual({ 'other_allowed_total{policy="burst",reason="counter"}': 1 });
    } finally {
      await a.close();
      await b.close();
      await c.close();
    }
  });
});

describe.each(ADAPTERS)('the sample app on %s', (adapter) => {
  const previous = process.env.REDIS_URL;
  beforeAll(() => delete process.env.REDIS_URL);
  afterAll(() => {
    if (previous !== undefined) process.env.REDIS_URL = previous;
  });

  it('serves its rate-limit metrics on GET /metrics, which is never limited itself', async () => {
    const app = await bootApp({ adapter, imports: [AppModule] });
    try {
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await request(app.getHttpServer()).get('/quotes')).status);
      expect(statuses).toEqual([200, 200, 200, 429]); // anonymous callers: 3 per minute
      for (let i = 0; i < 70; i++) expect((await request(app.getHttpServer()).get('/metrics')).status).toBe(200); // above the default 60/min
      const scrape = await request(app.getHttpServer()).get('/metrics');
      expect(scrape.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
      expect(scrape.headers['ratelimit']).toBeUndefined();
      expect(countsOf(parseExposition(scrape.text, 'rate_limit_'))).toEqual({
        'rate_limit_allowed_total{policy="plan",reason="counter"}': 3,
        'rate_limit_rejected_total{policy="plan",reason="counter"}': 1,
        'rate_limit_near_limit_total{policy="plan"}': 1,
        rate_limit_store_errors_total: 0,
        'rate_limit_decision_duration_seconds_count{outcome="allowed"}': 3,
        'rate_limit_decision_duration_seconds_count{outcome="rejected"}': 1,
        // The sample's /algorithms/adaptive route: its limit and the calls it has in flight (none).
        'rate_limit_adaptive_limit{policy="adaptive",route="AlgorithmsController.adaptive"}': 10,
        'rate_limit_adaptive_inflight{policy="adaptive",route="AlgorithmsController.adaptive"}': 0,
      });
    } finally {
      await app.close();
    }
  });
});
