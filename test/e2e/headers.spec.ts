import { Controller, Get, type INestApplication } from '@nestjs/common';
import type { AddressInfo } from 'node:net';
import { parseList } from 'structured-headers';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { Gate } from '../support/gate';
import { ADAPTERS, bootApp, MATRIX, rateLimitModule, redisPerTest, SharedRedis, sleep, clearOfMinuteEnd } from './harness';

// Some policies here count in aligned 1-minute windows on the real clock.
beforeEach(() => clearOfMinuteEnd());

/** A list field's members through the RFC 9651 parser: name and parameters (`undefined` when the field is absent). */
const members = (field: string | undefined): Array<Record<string, unknown>> | undefined =>
  field === undefined ? undefined : parseList(field).map(([name, params]) => ({ name, ...Object.fromEntries(params) }));

@Controller()
class HeadersController {
  constructor(private readonly gate: Gate) {}

  @Get('leased')
  @RateLimit({ algorithm: 'concurrency', limit: 1, window: '60s', name: 'slots' })
  async leased() {
    await this.gate.pass();
    return 'done';
  }

  @Get('leased-fresh')
  @RateLimit({ algorithm: 'concurrency', limit: 1, window: '60s', name: 'slots' })
  async leasedFresh() {
    await this.gate.pass();
    return 'done';
  }

  @Get('pair')
  @RateLimit({ algorithm: 'concurrency', limit: 2, window: '30s', name: 'default' })
  pair() {
    return 'pair';
  }

  @Get('quarter')
  @RateLimit({ algorithm: 'fixed-window', limit: 5, window: 250, name: 'quarter' })
  quarter() {
    return 'quarter';
  }

  @Get('odd')
  @RateLimit([
    { algorithm: 'sliding-window', limit: 3, window: 700, name: 'sw' },
    { algorithm: 'token-bucket', limit: 1, window: 1_500, name: 'tb' },
  ])
  odd() {
    return 'odd';
  }

  @Get('trial')
  @RateLimit([
    { algorithm: 'fixed-window', limit: 5, window: '1m', name: 'now' },
    { algorithm: 'fixed-window', limit: 1, window: '1m', name: 'next', mode: 'shadow' },
  ])
  trial() {
    return 'trial';
  }
}

describe.each(MATRIX)('rate-limit headers on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let url: string;
  const boot = async (options: RateLimitModuleOptions = {}) => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis, { headers: 'both', ...options })],
      controllers: [HeadersController],
      providers: [Gate],
    });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  };
  afterEach(async () => {
    app.get(Gate).release(); // a failed expectation must not leave a handler waiting
    await app.close();
  });
  afterAll(() => redis.stop());

  /** Waits until `predicate` holds (polling), failing after 2 s. */
  const until = async (predicate: () => boolean) => {
    for (const started = Date.now(); !predicate(); await sleep(5)) {
      if (Date.now() - started > 2_000) throw new Error('condition not reached within 2 s');
    }
  };

  /** Holds one request of `path` inside its handler; resolves when it is in, with its response to come. */
  const hold = async (path: string) => {
    const gate = app.get(Gate);
    gate.close();
    const response = request(url)
      .get(path)
      .then((res) => res);
    await until(() => gate.inside === 1);
    return { done: () => (gate.release(), response) };
  };

  describe('concurrency', () => {
    beforeEach(() => boot({ headerProfile: 'draft-10' }));

    it('states concurrent requests, with no window', async () => {
      const res = await request(url).get('/pair');
      expect(members(res.headers['ratelimit-policy'])).toEqual([{ name: 'default', q: 2, qu: 'concurrent-requests' }]);
    });

    it("a rejection's Retry-After is how long leases have been held, not the lease TTL", async () => {
      app.get(Gate).release();
      expect((await request(url).get('/leased')).status).toBe(200); // a lease held for a few ms
      const held = await hold('/leased');
      const res = await request(url).get('/leased');
      expect(res.status).toBe(429);
      expect(res.headers['retry-after']).toBe('1');
      expect(res.body.retryAfter).toBe(1);
      expect(members(res.headers['ratelimit'])).toEqual([{ name: 'slots', r: 0, t: 1 }]);
      expect((await held.done()).status).toBe(200);
    });

    it('before any lease was released, the wait is the soonest lease expiry', async () => {
      const held = await hold('/leased-fresh');
      const res = await request(url).get('/leased-fresh');
      expect(res.status).toBe(429);
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(59);
      expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect((await held.done()).status).toBe(200);
    });
  });

  describe('windows that are not whole seconds', () => {
    beforeEach(() => boot());

    it('5 per 250 ms is stated as 20 per second', async () => {
      const res = await request(url).get('/quarter');
      expect(members(res.headers['ratelimit-policy'])).toEqual([{ name: 'quarter', q: 20, w: 1 }]);
    });

    it('3 per 700 ms as 30 per 7 s; a bucket of 1 refilled every 1.5 s as 2 per 3 s', async () => {
      const res = await request(url).get('/odd');
      expect(members(res.headers['ratelimit-policy'])).toEqual([
        { name: 'sw', q: 30, w: 7 },
        { name: 'tb', q: 2, w: 3 },
      ]);
    });
  });

  describe('shadow policies', () => {
    it('are left out of every header by default', async () => {
      await boot();
      await request(url).get('/trial');
      const res = await request(url).get('/trial'); // 'next' would have rejected this one
      expect(res.status).toBe(200);
      expect(members(res.headers['ratelimit-policy'])).toEqual([{ name: 'now', q: 5, w: 60 }]);
      expect(members(res.headers['ratelimit'])).toEqual([{ name: 'now', r: 3, t: expect.any(Number) }]);
      expect(res.headers['x-ratelimit-limit']).toBe('5');
      expect(res.headers['x-ratelimit-remaining']).toBe('3');
    });

    it('are sent with shadowHeaders: true', async () => {
      await boot({ shadowHeaders: true });
      await request(url).get('/trial');
      const res = await request(url).get('/trial');
      expect(res.status).toBe(200);
      expect(members(res.headers['ratelimit-policy'])).toEqual([
        { name: 'now', q: 5, w: 60 },
        { name: 'next', q: 1, w: 60 },
      ]);
      expect(members(res.headers['ratelimit'])?.map((m) => [m.name, m.r])).toEqual([
        ['now', 3],
        ['next', 0],
      ]);
    });

    it('module-wide shadow mode sends no rate-limit headers by default', async () => {
      await boot({ mode: 'shadow' });
      const res = await request(url).get('/quarter');
      expect(res.status).toBe(200);
      for (const name of ['ratelimit-policy', 'ratelimit', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
        expect(res.headers[name]).toBeUndefined();
      }
    });
  });
});

@Controller()
class OutageController {
  @Get('limited')
  @RateLimit({ algorithm: 'fixed-window', limit: 3, window: '1h', name: 'hourly' })
  limited() {
    return 'limited';
  }
}

describe.each(ADAPTERS)('rate-limit headers while the Redis store is down, on %s', (adapter) => {
  const redis = redisPerTest();
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
  });

  it('a fail-open answer states the policy but no made-up quota', async () => {
    app = await bootApp({
      adapter,
      imports: [RateLimitModule.forRoot({ redis: redis.client, storeTimeoutMs: 50, headers: 'both', onStoreError: 'fail-open' })],
      controllers: [OutageController],
    });
    const before = await request(app.getHttpServer()).get('/limited');
    expect(members(before.headers['ratelimit'])).toEqual([{ name: 'hourly', r: 2, t: expect.any(Number) }]);
    await redis.server.stop();
    const res = await request(app.getHttpServer()).get('/limited');
    expect(res.status).toBe(200);
    expect(members(res.headers['ratelimit-policy'])).toEqual([{ name: 'hourly', q: 3, w: 3600 }]);
    for (const name of ['ratelimit', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) {
      expect(res.headers[name]).toBeUndefined();
    }
  });
});
