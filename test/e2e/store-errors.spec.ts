import { Controller, Get, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { ADAPTERS, bootApp, MATRIX, rateLimitModule, redisPerTest, SharedRedis } from './harness';

@Controller()
class StoreController {
  @Get('limited')
  @RateLimit('fixed-window', 1, '1h')
  limited() {
    return 'limited';
  }
}

describe.each(ADAPTERS)('when the Redis store is down, on %s', (adapter) => {
  const redis = redisPerTest();
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
  });

  const bootAndStopRedis = async (options: RateLimitModuleOptions) => {
    app = await bootApp({
      adapter,
      imports: [RateLimitModule.forRoot({ redis: redis.client, storeTimeoutMs: 50, ...options })],
      controllers: [StoreController],
    });
    await redis.server.stop();
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
