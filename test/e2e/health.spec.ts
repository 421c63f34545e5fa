import { Controller, Get, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Redis } from 'ioredis';
import request from 'supertest';
import { RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { RateLimitHealthIndicator } from '../../lib/terminus';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { ADAPTERS, bootApp, sleep, type AdapterName } from './harness';

@Controller()
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly rateLimit: RateLimitHealthIndicator,
  ) {}

  @Get('health')
  @HealthCheck()
  check() {
    return this.health.check([() => this.rateLimit.isHealthy('rate-limit')]);
  }
}

const bootHealthApp = (adapter: AdapterName, options: RateLimitModuleOptions) =>
  bootApp({
    adapter,
    imports: [RateLimitModule.forRoot(options), TerminusModule],
    controllers: [HealthController],
    providers: [RateLimitHealthIndicator],
  });

/** What Redis took lately and this process's own stalls, p99 in ms: numbers whose values depend on the machine. */
const TIMINGS = { storeLatencyMs: expect.any(Number), eventLoopDelayMs: expect.any(Number) };
const UP_REDIS = { status: 'up', store: 'redis', ...TIMINGS };
const healthy = (details: object) => ({ status: 'ok', info: { 'rate-limit': details }, error: {}, details: { 'rate-limit': details } });
const unhealthy = (details: object) => ({
  status: 'error',
  info: {},
  error: { 'rate-limit': details },
  details: { 'rate-limit': details },
});

describe.each(ADAPTERS)('RateLimitHealthIndicator with terminus on %s', (adapter) => {
  let redis: RedisProcess;
  let app: INestApplication | undefined;
  beforeEach(async () => {
    redis = await startRedis();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await redis.stop();
  });
  const health = () => request(app!.getHttpServer()).get('/health');

  it('is up while redis-server runs, down once it is stopped, and up again after it restarts (client the module created)', async () => {
    app = await bootHealthApp(adapter, { redis: redis.url, storeTimeoutMs: 100 });
    const up = await health();
    expect(up.status).toBe(200);
    expect(up.body).toEqual(healthy(UP_REDIS));

    await redis.stop();
    await sleep(100); // let the client see the connection close (else the PING dies with the socket instead)
    const down = await health();
    expect(down.status).toBe(503);
    // The module's own client has no offline queue: the PING fails at once.
    expect(down.body).toEqual(
      unhealthy({ status: 'down', store: 'redis', ...TIMINGS, message: "Stream isn't writeable and enableOfflineQueue options is false" }),
    );

    await redis.restart();
    let again = await health();
    for (let attempt = 0; attempt < 50 && again.status !== 200; attempt++) {
      await sleep(100); // the client reconnects in the background (backoff up to 1 s)
      again = await health();
    }
    expect(again.body).toEqual(healthy(UP_REDIS));
  });

  it('reports down within storeTimeoutMs when a client of yours queues commands while disconnected', async () => {
    const client = new Redis(redis.url); // ioredis defaults: offline queue on, PING would wait for the reconnect
    client.on('error', () => undefined); // the server is stopped on purpose
    await client.ping();
    try {
      app = await bootHealthApp(adapter, { redis: client, storeTimeoutMs: 100 });
      expect((await health()).body).toEqual(healthy(UP_REDIS));

      await redis.stop();
      const started = Date.now();
      const down = await health();
      expect(Date.now() - started).toBeLessThan(1_000);
      expect(down.status).toBe(503);
      expect(down.body).toEqual(
        unhealthy({
          status: 'down',
          store: 'redis',
          ...TIMINGS,
          message: 'The rate-limit store did not answer within storeTimeoutMs (100 ms).',
        }),
      );
    } finally {
      await app?.close();
      app = undefined;
      client.disconnect();
    }
  });

  it('the memory store is always up', async () => {
    app = await bootHealthApp(adapter, {});
    const res = await health();
    expect(res.status).toBe(200);
    expect(res.body).toEqual(healthy({ status: 'up', store: 'memory' }));
  });
});
