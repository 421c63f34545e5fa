/**
 * The outage default holds fleet-wide (issue #41): three Nest apps ("instances") share one real redis-server
 * with the default `onStoreError` ('insurance') and no `insuranceShare`. Each instance's runtime-overrides poll
 * (every 500 ms) records it in Redis (a sorted set under `<prefix>:{overrides}:instances`, with a TTL) and brings
 * back how many instances polled in the last minute. Redis is then stopped, and a client limited to 30 an hour
 * (sliding-log: exact, no window boundary mid-test) sends 20 requests to each instance: each admits exactly
 * 10 (1/3 of 30), 30 across the fleet, within the bound of 30 + 3. With `insuranceShare: 1` set, each
 * instance admits the whole 30 again (an explicit share wins). The overrides poller's first warning is checked
 * word for word.
 */
import { Controller, Get, Logger, type INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { INSTANCE_LIVE_MS, OVERRIDE_POLL_MS } from '../../lib/pipeline/override-sync';
import { bootApp, sleep } from '../e2e/harness';
import { startRedis, type RedisProcess } from '../support/redis-server';

const LIMIT = 30;
const INSTANCES = 3;
const REQUESTS_EACH = 20;

@Controller('api')
@RateLimit({ name: 'api', algorithm: 'sliding-log', limit: LIMIT, window: '1h', by: () => 'the-client' })
class ApiController {
  @Get()
  get() {
    return 'ok';
  }
}

let server: RedisProcess | undefined;
let apps: INestApplication[] = [];
let warnings: Array<{ context: string | undefined; message: string }> = [];
let prefixes = 0;

beforeEach(() => {
  warnings = [];
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(function (this: Logger, message: unknown) {
    warnings.push({ context: (this as unknown as { context?: string }).context, message: String(message) });
  });
});

afterEach(async () => {
  for (const app of apps) await app.close();
  apps = [];
  await server?.stop();
  server = undefined;
  jest.restoreAllMocks();
}, 30_000);

/** `count` instances on one Redis under one prefix, each polling; resolves once every one has counted them all. */
async function fleet(options: Partial<RateLimitModuleOptions>): Promise<{ prefix: string; instances: INestApplication[] }> {
  server = await startRedis();
  const prefix = `fleet-${++prefixes}`;
  const instances: INestApplication[] = [];
  for (let i = 0; i < INSTANCES; i++) {
    const app = await bootApp({
      adapter: 'express',
      imports: [RateLimitModule.forRoot({ redis: server.url, prefix, ...options })],
      controllers: [ApiController],
    });
    apps.push(app);
    instances.push(app);
  }
  const probe = new Redis(server.url);
  try {
    const key = `${prefix}:{overrides}:instances`;
    for (let started = Date.now(); (await probe.zcard(key)) < INSTANCES; await sleep(50)) {
      if (Date.now() - started > 10_000) throw new Error('the instances did not all record themselves within 10 s');
    }
    // The heartbeat lives in Redis with a TTL of a minute, renewed by every poll.
    const ttl = await probe.pttl(key);
    expect(ttl).toBeGreaterThan(INSTANCE_LIVE_MS - 2_000);
    expect(ttl).toBeLessThanOrEqual(INSTANCE_LIVE_MS);
  } finally {
    probe.disconnect();
  }
  // Each instance's next poll (within OVERRIDE_POLL_MS) brings back all of them; two polls of margin.
  await sleep(2 * OVERRIDE_POLL_MS + 100);
  return { prefix, instances };
}

/** Statuses of `REQUESTS_EACH` requests to each instance in turn, per instance. */
async function admitted(instances: INestApplication[]): Promise<number[]> {
  const counts = instances.map(() => 0);
  for (let r = 0; r < REQUESTS_EACH; r++) {
    for (const [i, app] of instances.entries()) {
      const { status } = await request(app.getHttpServer()).get('/api');
      expect([200, 429]).toContain(status);
      if (status === 200) counts[i]++;
    }
  }
  return counts;
}

describe('insurance while Redis is away, by default', () => {
  it('three instances admit 30 of a client limited to 30 between them (10 each), within the bound of 30 + 3', async () => {
    const { instances } = await fleet({});
    // While Redis answers, it decides: one request on each instance counts against the shared 30.
    for (const app of instances) await request(app.getHttpServer()).get('/api').expect(200);
    await server!.stop();
    const counts = await admitted(instances);
    expect(counts).toEqual([10, 10, 10]);
    const total = counts.reduce((a, b) => a + b, 0);
    expect(total).toBe(LIMIT);
    expect(total).toBeLessThanOrEqual(LIMIT + INSTANCES);
  }, 60_000);

  it('an explicit insuranceShare wins: 1 lets each instance admit the whole limit', async () => {
    const { instances } = await fleet({ insuranceShare: 1 });
    await server!.stop();
    expect(await admitted(instances)).toEqual([REQUESTS_EACH, REQUESTS_EACH, REQUESTS_EACH].map(() => Math.min(REQUESTS_EACH, LIMIT)));
  }, 60_000);

  it("the overrides poller's first warning says what happened and what the app does meanwhile", async () => {
    const { instances } = await fleet({});
    const port = server!.port;
    await server!.stop();
    // Every instance polls within OVERRIDE_POLL_MS and warns once (each tells its own operator).
    for (let started = Date.now(); warnings.filter((w) => w.context === 'RateLimitOverrides').length < instances.length; await sleep(20)) {
      if (Date.now() - started > 5_000) throw new Error(`no poller warning within 5 s: ${JSON.stringify(warnings)}`);
    }
    const lines = warnings.filter((w) => w.context === 'RateLimitOverrides').map((w) => w.message);
    const store = `Redis at 127\\.0\\.0\\.1:${port}`;
    // The cause is ioredis's last connection error (the server closing the connection as it stops, or a refused
    // reconnection), else the command's own failure: no connection.
    const reachable = `is not reachable: (connect ECONNREFUSED 127\\.0\\.0\\.1:${port}|read ECONNRESET)`;
    const cause = `${store} (${reachable}|is unavailable: no connection \\(ioredis: "Stream isn't writeable and enableOfflineQueue options is false"\\))`;
    const expected = new RegExp(
      `^Runtime overrides could not be read: ${cause}\\. They are read again every 500 ms; meanwhile no override is in force \\(none was set at the last read\\), ` +
        `and each policy's onStoreError decides until Redis answers again \\(with 'insurance', the default, this instance grants 1/3 of each limit: ` +
        `3 instances polled Redis in the last minute\\)\\.$`,
    );
    for (const line of lines) expect(line).toMatch(expected);
  }, 60_000);
});
