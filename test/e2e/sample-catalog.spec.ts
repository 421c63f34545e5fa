import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import { AppModule } from '../../sample/app.module';
import { bootApp, ADAPTERS } from './harness';

/** The sample's `/catalog` routes: named policies overridden, skipped and exempted per route (memory store). */
describe.each(ADAPTERS)('sample catalog routes on %s', (adapter) => {
  let app: INestApplication;
  const previous = process.env.REDIS_URL;

  beforeAll(async () => {
    delete process.env.REDIS_URL;
    app = await bootApp({ adapter, imports: [AppModule] });
  });
  afterAll(async () => {
    await app.close();
    if (previous !== undefined) process.env.REDIS_URL = previous;
  });

  const get = (path: string, headers: Record<string, string> = {}) => request(app.getHttpServer()).get(path).set(headers);

  it('an override changes only the burst limit; the hourly policy keeps applying', async () => {
    const first = await get('/catalog/search');
    expect(first.headers['ratelimit-policy']).toBe('"burst";q=2;w=1, "hourly";q=100;w=3600');
    const statuses = [first.status];
    for (let i = 0; i < 2; i++) statuses.push((await get('/catalog/search')).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect((await get('/catalog/items')).headers['ratelimit-policy']).toBe('"burst";q=5;w=1, "hourly";q=100;w=3600');
  });

  it('@SkipRateLimit drops the burst policy only', async () => {
    const statuses: number[] = [];
    let policy = '';
    for (let i = 0; i < 8; i++) {
      const res = await get('/catalog/export');
      statuses.push(res.status);
      policy = res.headers['ratelimit-policy'];
    }
    expect(statuses).toEqual(Array(8).fill(200));
    expect(policy).toBe('"hourly";q=100;w=3600');
  });

  it('skipIf exempts internal calls from the burst policy', async () => {
    const res = await get('/catalog/items', { 'x-internal': 'demo' });
    expect(res.status).toBe(200);
    expect(res.headers['ratelimit-policy']).toBe('"hourly";q=100;w=3600');
  });
});
