import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { AppModule } from '../../sample/app.module';
import { ADAPTERS, bootApp } from './harness';

/**
 * The sample's outbound route (memory store): quotes from a stand-in partner that allows 3 calls a second and
 * says so in its `RateLimit` field; `wrapFetch` listens to it, so every quote arrives and the calls spread over
 * the partner's windows.
 */
describe.each(ADAPTERS)('sample outbound calls on %s', (adapter) => {
  let app: INestApplication;
  const previous = process.env.REDIS_URL;

  beforeAll(async () => {
    delete process.env.REDIS_URL;
    app = await bootApp({ adapter, imports: [AppModule] });
    await app.listen(0, '127.0.0.1');
  });
  afterAll(async () => {
    await app?.close();
    if (previous !== undefined) process.env.REDIS_URL = previous;
  });

  it('GET /outbound/quotes?n=7: every quote, over at least three of the partner’s one-second windows', async () => {
    const res = await request(app.getHttpServer()).get('/outbound/quotes?n=7');
    expect(res.status).toBe(200);
    expect(res.body.quotes).toEqual(Array.from({ length: 7 }, (_, id) => ({ id, price: 100 + id })));
    // 3 a second: the 7th call is in the third window, so more than one second boundary has passed.
    expect(res.body.tookMs).toBeGreaterThan(1_000);
    console.log(`${adapter}: 7 quotes in ${res.body.tookMs} ms, ${res.body.partnerRejections} answered 429 first`);
  }, 30_000);
});
