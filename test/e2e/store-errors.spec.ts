import { Controller, Get, type INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { ADAPTERS, bootApp, MATRIX, rateLimitModule, SharedRedis } from './harness';

@Controller()
class StoreController {
  @Get('limited')
  @RateLimit('fixed-window', 1, '1h')
  limited() {
    return 'limited';
  }
}

describe.each(ADAPTERS)('when the Redis store is down, on %s', (adapter) => {
  let server: RedisProcess;
  let client: Redis;
  let app: INestApplication | undefined;
  beforeEach(async () => {
    server = await startRedis();
    client = new Redis(server.url, { maxRetriesPerRequest: 0 });
    client.on('error', () => undefined); // the server is stopped on purpose
    await client.ping();
  });
  afterEach(async () => {
    await app?.close();
    client.disconnect();
    await server.stop();
  });

  const bootAndStopRedis = async (options: RateLimitModuleOptions) => {
    app = await bootApp({
      adapter,
      imports: [RateLimitModule.forRoot({ redis: client, storeTimeoutMs: 50, ...options })],
      controllers: [StoreController],
    });
    await server.stop();
  };

  it("answers 503 with onStoreError: 'fail-closed'", async () => {
    await bootAndStopRedis({ onStoreError: 'fail-closed' });
    const res = await request(app!.getHttpServer()).get('/limited');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ statusCode: 503, message: 'Rate limit store unavailable', error: 'Service Unavailable' });
    expect(res.headers['retry-after']).toBeUndefined();
  });

  it("lets requests through with onStoreError: 'fail-open' (the default)", async () => {
    await bootAndStopRedis({});
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await request(app!.getHttpServer()).get('/limited')).status);
    expect(statuses).toEqual([200, 200, 200]);
  });
});

describe.each(MATRIX)("module-wide mode: 'shadow' on $adapter with the $store store", ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis, { mode: 'shadow', shadowHeaders: true })],
      controllers: [StoreController],
    });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  it('never rejects, and reports the quota with shadowHeaders', async () => {
    const responses = [];
    for (let i = 0; i < 3; i++) responses.push(await request(app.getHttpServer()).get('/limited'));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(responses.map((r) => /r=(\d+)/.exec(r.headers['ratelimit'])?.[1])).toEqual(['0', '0', '0']);
  });
});
