import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { AppModule } from '../../sample/app.module';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { ADAPTERS, bootApp, sleep } from './harness';

/**
 * The sample's runtime-overrides routes (sample/tenants.controller.ts, the example of docs/overrides.md) answer as
 * a production route should, on Redis: a plan the library refuses (`perMinute` 0, "lots", nothing) is a 400 with
 * the RateLimitConfigError's message, not a 500; with Redis stopped, setting, removing and listing plans is a 503
 * with the RateLimitStoreError's message (the change may or may not have been made).
 */
describe.each(ADAPTERS)('sample tenant plans on %s with Redis', (adapter) => {
  let redis: RedisProcess;
  let app: INestApplication;
  const previous = process.env.REDIS_URL;
  const admin = { 'x-admin-token': 'demo-admin' };
  const http = () => request(app.getHttpServer());

  beforeAll(async () => {
    redis = await startRedis();
    process.env.REDIS_URL = redis.url;
    app = await bootApp({ adapter, imports: [AppModule] });
    // The library's client connects in the background and does not queue commands while offline.
    await sleep(300);
  });
  afterAll(async () => {
    await app?.close();
    await redis?.stop();
    if (previous === undefined) delete process.env.REDIS_URL;
    else process.env.REDIS_URL = previous;
  });

  it.each([
    [{ perMinute: 0 }, 'setOverride: limit: 0 must be a whole number ≥ 1.'],
    [{ perMinute: 'lots' }, 'setOverride: limit: "lots" must be a whole number ≥ 1.'],
    [
      {},
      'setOverride: override: {} sets nothing; give limit, window and/or burst (to go back to the policy as written, call removeOverride).',
    ],
  ])('PUT /tenants/plans/acme %j: 400 with the library’s message', async (body, message) => {
    const res = await http().put('/tenants/plans/acme').set(admin).send(body);
    expect([res.status, res.body]).toEqual([400, { statusCode: 400, message, error: 'Bad Request' }]);
    expect((await http().get('/tenants/plans').set(admin)).body).toEqual([]);
  });

  it('a valid plan is set (204), and listed', async () => {
    expect((await http().put('/tenants/plans/acme').set(admin).send({ perMinute: 8 })).status).toBe(204);
    expect((await http().get('/tenants/plans').set(admin)).body).toEqual([
      { policy: 'tenant-api', tracker: 'acme', override: { limit: 8 } },
    ]);
  });

  it('Redis stopped: 503 with the store error’s message, for setting, removing and listing plans', async () => {
    await redis.stop();
    const set = await http().put('/tenants/plans/acme').set(admin).send({ perMinute: 9 });
    expect(set.status).toBe(503);
    expect(set.body.error).toBe('Service Unavailable');
    expect(set.body.message).toMatch(
      /^setOverride: the rate-limit store failed \(.+\); the change may or may not have been made \(call again, or check listOverrides\(\)\)\.$/,
    );
    const removed = await http().delete('/tenants/plans/acme').set(admin);
    expect(removed.status).toBe(503);
    expect(removed.body.message).toMatch(/^removeOverride: the rate-limit store failed \(.+\); the change may or may not have been made/);
    const listed = await http().get('/tenants/plans').set(admin);
    expect(listed.status).toBe(503);
    expect(listed.body.message).toMatch(/^listOverrides: the rate-limit store failed \(.+\); the overrides could not be read\.$/);
  });
});
