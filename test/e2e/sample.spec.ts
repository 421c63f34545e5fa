import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { AppModule } from '../../sample/app.module';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { bootApp, clearOfMinuteEnd, MATRIX, sleep } from './harness';

/** Smoke test: the sample app boots on both adapters and both stores and answers as its comments say. */
describe.each(MATRIX)('sample app on $adapter with the $store store', ({ adapter, store }) => {
  let redis: RedisProcess | undefined;
  let app: INestApplication;
  const previous = process.env.REDIS_URL;

  beforeAll(async () => {
    if (store === 'redis') {
      redis = await startRedis();
      process.env.REDIS_URL = redis.url;
    } else delete process.env.REDIS_URL;
    app = await bootApp({ adapter, imports: [AppModule] });
    // The client the module creates from REDIS_URL connects in the background and does not queue commands
    // while offline, so a request in the first milliseconds would be decided by the onStoreError fallback.
    if (redis) await sleep(300);
  });
  afterAll(async () => {
    await app.close();
    await redis?.stop();
    if (previous === undefined) delete process.env.REDIS_URL;
    else process.env.REDIS_URL = previous;
  });
  const http = () => request(app.getHttpServer());

  it('applies the defaultPolicy to GET / and skips /health', async () => {
    const index = await http().get('/');
    expect(index.status).toBe(200);
    expect(index.headers['ratelimit-policy']).toBe('"default";q=60;w=60');
    expect(index.headers['ratelimit']).toBe('"default";r=59;t=1');
    const health = await http().get('/health');
    expect(health.body).toEqual({ status: 'ok' });
    expect(health.headers['ratelimit']).toBeUndefined();
  });

  it('limits by plan tier from x-api-key', async () => {
    expect((await http().get('/quotes').set('x-api-key', 'demo-pro')).headers['ratelimit-policy']).toBe('"plan";q=100;w=60');
    expect((await http().get('/quotes').set('x-api-key', 'demo-free')).headers['ratelimit-policy']).toBe('"plan";q=10;w=60');
    const anonymous = [];
    for (let i = 0; i < 4; i++) anonymous.push((await http().get('/quotes')).status);
    expect(anonymous).toEqual([200, 200, 200, 429]);
  });

  it('shows each algorithm on its own route', async () => {
    for (const algorithm of ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra', 'leaky-bucket']) {
      const res = await http().get(`/algorithms/${algorithm}`);
      expect(res.status).toBe(200);
      expect(res.body.algorithm).toBe(algorithm);
      expect(res.headers['ratelimit-policy']).toBe(algorithm === 'token-bucket' ? '"default";q=10;w=20' : '"default";q=5;w=10');
    }
  });

  it('shows an adaptive limit: 10 of a burst of 20 get in, the rest get 503 with Retry-After', async () => {
    const burst = await Promise.all(Array.from({ length: 20 }, () => http().get('/algorithms/adaptive')));
    const admitted = burst.filter((r) => r.status === 200);
    const refused = burst.filter((r) => r.status === 503);
    expect([admitted.length, refused.length]).toEqual([10, 10]);
    expect(burst.map((r) => r.headers['ratelimit-policy'])).toEqual(burst.map(() => '"adaptive";q=10;qu="concurrent-requests"'));
    expect(refused.map((r) => [r.headers['retry-after'], r.headers['ratelimit']])).toEqual(refused.map(() => ['1', '"adaptive";r=0']));
  });

  it('counts only failed logins', async () => {
    const login = (password: string) => http().post('/login').send({ username: 'ann', password });
    for (let i = 0; i < 6; i++) expect((await login('correct horse')).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await login('guess')).status).toBe(401);
    const locked = await login('correct horse');
    expect(locked.status).toBe(429);
    expect(locked.headers['retry-after']).toBe('900');
  });

  it('limits /feed for everyone (in slices with Redis) and per client', async () => {
    const statuses: number[] = [];
    const everyone: number[] = [];
    const client: number[] = [];
    for (let i = 0; i < 21; i++) {
      const res = await http().get('/feed');
      statuses.push(res.status);
      const [, e, c] = /^"everyone";r=(\d+);t=\d+, "client";r=(\d+);t=\d+$/.exec(String(res.headers['ratelimit'])) ?? [];
      everyone.push(Number(e));
      client.push(Number(c));
    }
    expect(statuses).toEqual([...Array<number>(20).fill(200), 429]);
    expect(client.slice(0, 20)).toEqual(Array.from({ length: 20 }, (_, i) => 19 - i));
    // The global bucket (2,000, two units back per ms) has never been below 2,000 − 21.
    expect(everyone.slice(0, 20).every((r) => r >= 1_979 && r <= 1_999)).toBe(true);
  });

  it("sets a tenant's plan limit at runtime from an admin route", async () => {
    await clearOfMinuteEnd();
    const admin = { 'x-admin-token': 'demo-admin' };
    const sent = async (tenant: string) => {
      const statuses: number[] = [];
      let policy: string | undefined;
      for (let i = 0; i < 9; i++) {
        const res = await http().get('/tenants/data').set('x-tenant', tenant);
        policy ??= res.headers['ratelimit-policy'];
        statuses.push(res.status);
      }
      return { admitted: statuses.filter((s) => s === 200).length, policy };
    };
    expect((await http().put('/tenants/plans/acme').send({ perMinute: 8 })).status).toBe(403);
    expect((await http().put('/tenants/plans/acme').set(admin).send({ perMinute: 0 })).body.message).toBe(
      'setOverride: limit: 0 must be a whole number ≥ 1.',
    );
    expect((await http().put('/tenants/plans/acme').set(admin).send({ perMinute: 8 })).status).toBe(204);
    expect((await http().get('/tenants/plans').set(admin)).body).toEqual([
      { policy: 'tenant-api', tracker: 'acme', override: { limit: 8 } },
    ]);
    expect(await sent('acme')).toEqual({ admitted: 8, policy: '"tenant-api";q=8;w=60' });
    expect(await sent('globex')).toEqual({ admitted: 5, policy: '"tenant-api";q=5;w=60' });
    expect((await http().delete('/tenants/plans/acme').set(admin)).status).toBe(204);
    expect((await http().get('/tenants/plans').set(admin)).body).toEqual([]);
  });

  it('never rejects on the shadowed policy of /search', async () => {
    const statuses = [];
    for (let i = 0; i < 7; i++) statuses.push((await http().get('/search')).status);
    expect(statuses).toEqual(new Array(7).fill(200));
  });
});
