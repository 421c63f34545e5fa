import type { INestApplication } from '@nestjs/common';
import { parseList } from 'structured-headers';
import request from 'supertest';
import { RateLimiterService } from '../../lib';
import { AI_TOKEN_BUDGETS } from '../../sample/ai.controller';
import { AppModule } from '../../sample/app.module';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { bootApp, MATRIX, sleep } from './harness';

/** The `r` of each member of a RateLimit field, by policy name. */
const remaining = (field: string) => Object.fromEntries(parseList(field).map(([name, params]) => [name, params.get('r')]));

/** The sample's `POST /ai/complete`: token budgets reserved at `maxTokens`, settled at the tokens used. */
describe.each(MATRIX)('sample AI route on $adapter with the $store store', ({ adapter, store }) => {
  let redis: RedisProcess | undefined;
  let app: INestApplication;
  const previous = process.env.REDIS_URL;

  beforeAll(async () => {
    if (store === 'redis') {
      redis = await startRedis();
      process.env.REDIS_URL = redis.url;
    } else delete process.env.REDIS_URL;
    app = await bootApp({ adapter, imports: [AppModule] });
    // The client the module creates from REDIS_URL connects in the background (see sample.spec.ts).
    if (redis) await sleep(300);
  });
  afterAll(async () => {
    await app.close();
    await redis?.stop();
    if (previous === undefined) delete process.env.REDIS_URL;
    else process.env.REDIS_URL = previous;
  });

  const complete = (prompt: string, maxTokens: number) =>
    request(app.getHttpServer()).post('/ai/complete').set('x-api-key', 'demo').send({ prompt, maxTokens });
  /** The per-minute budget as the route's counter holds it (the budgets have a scope). */
  const minuteLeft = async () => (await app.get(RateLimiterService).peek(AI_TOKEN_BUDGETS[0], 'apikey:demo', { cost: 1 })).remaining;
  /** Waits until the settlement (after the response) has reached the store. */
  const until = async (left: number) => {
    for (const started = Date.now(); (await minuteLeft()) !== left; await sleep(5)) {
      if (Date.now() - started > 5_000) throw new Error(`the per-minute budget did not reach ${left} within 5 s`);
    }
  };

  it('reserves maxTokens from both budgets, gives back what was not used, and charges an overdraw', async () => {
    // 40 characters: 10 prompt tokens and 30 completion tokens, of 100 reserved.
    const first = await complete('x'.repeat(40), 100);
    expect(first.status).toBe(200);
    expect(first.body.usage).toEqual({ promptTokens: 10, completionTokens: 30, totalTokens: 40 });
    expect(first.headers['ratelimit-policy']).toBe('"tokens-minute";q=2000;w=60, "tokens-day";q=50000;w=86400');
    expect(remaining(first.headers['ratelimit'])).toEqual({ 'tokens-minute': 1_900, 'tokens-day': 49_900 });
    await until(1_960);

    // 400 characters: 100 prompt tokens and 20 completion tokens, of 20 reserved: 100 more are charged.
    const second = await complete('y'.repeat(400), 20);
    expect(second.body.usage.totalTokens).toBe(120);
    expect(remaining(second.headers['ratelimit'])).toEqual({ 'tokens-minute': 1_940, 'tokens-day': 49_940 });
    await until(1_840);
    const third = await complete('z', 1);
    expect(remaining(third.headers['ratelimit'])).toEqual({ 'tokens-minute': 1_839, 'tokens-day': 49_839 });
  });
});
