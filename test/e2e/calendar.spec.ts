import { Controller, Get, Logger, type ExecutionContext, type INestApplication, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { RateLimit, RateLimitModule, type CalendarWindow } from '../../lib';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { RATE_LIMIT_STORE } from '../../lib/rate-limit.module-definition';
import { RateLimitTestClock, RateLimitTestingModule } from '../../lib/testing';
import { AppModule } from '../../sample/app.module';
import { ADAPTERS, bootApp, initApp, rateLimitModule, SharedRedis } from './harness';

const S = 1000;
const H = 3_600_000;
const D = 24 * H;

const calendar = (window: CalendarWindow) => RateLimit({ name: 'daily', algorithm: 'fixed-window', limit: 2, window });
const zoneOf = (c: ExecutionContext) => c.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-tz'];

@Controller()
class ReportsController {
  @Get('new-york')
  @calendar({ calendar: 'day', timeZone: 'America/New_York' })
  newYork() {
    return 'ok';
  }

  @Get('berlin')
  @calendar({ calendar: 'day', timeZone: 'Europe/Berlin' })
  berlin() {
    return 'ok';
  }

  @Get('kolkata-month')
  @calendar({ calendar: 'month', timeZone: 'Asia/Kolkata' })
  kolkataMonth() {
    return 'ok';
  }

  @Get('lord-howe')
  @calendar({ calendar: 'day', timeZone: 'Australia/Lord_Howe' })
  lordHowe() {
    return 'ok';
  }

  /** The client's own day, in the zone its `x-tz` header names. */
  @Get('mine')
  @RateLimit({ name: 'daily', algorithm: 'fixed-window', limit: 2, window: (c) => ({ calendar: 'day', timeZone: zoneOf(c) }) })
  mine() {
    return 'ok';
  }
}

/** Headers of one response, as asserted below. */
function quota(res: request.Response) {
  return {
    status: res.status,
    policy: res.headers['ratelimit-policy'],
    ratelimit: res.headers['ratelimit'],
    retryAfter: res.headers['retry-after'],
  };
}

describe.each(ADAPTERS)('calendar windows over HTTP on %s, memory store on a test clock', (adapter) => {
  let app: INestApplication;
  let clock: RateLimitTestClock;
  beforeEach(async () => {
    app = await bootApp({ adapter, imports: [RateLimitTestingModule.forRoot()], controllers: [ReportsController] });
    clock = app.get(RateLimitTestClock);
  });
  afterEach(() => app.close());
  const get = (path: string, tz?: string) => {
    const req = request(app.getHttpServer()).get(path);
    return tz === undefined ? req : req.set('x-tz', tz);
  };

  it('New York, 2026-03-08, a 23-hour day: w=82800, then t and Retry-After run to local midnight', async () => {
    clock.set(1773027000 * S); // 23:30 EDT (`TZ=America/New_York date -d '2026-03-08 23:30' +%s`)
    expect(quota(await get('/new-york'))).toEqual({
      status: 200,
      policy: '"daily";q=2;w=82800',
      ratelimit: '"daily";r=1;t=1800',
      retryAfter: undefined,
    });
    expect(quota(await get('/new-york'))).toMatchObject({ status: 200, ratelimit: '"daily";r=0;t=1800' });
    clock.advance(1);
    const rejected = await get('/new-york');
    expect(quota(rejected)).toEqual({ status: 429, policy: '"daily";q=2;w=82800', ratelimit: '"daily";r=0;t=1800', retryAfter: '1800' });
    expect(rejected.body).toMatchObject({ statusCode: 429, retryAfter: 1800 });
    clock.set(1773028800 * S); // 2026-03-09 00:00: a day of 24 h
    expect(quota(await get('/new-york'))).toEqual({
      status: 200,
      policy: '"daily";q=2;w=86400',
      ratelimit: '"daily";r=1;t=86400',
      retryAfter: undefined,
    });
  });

  it('Europe/Berlin, 2026-10-25, a 25-hour day', async () => {
    clock.set(1792879200 * S + 1); // 00:00:00.001 CEST
    expect(quota(await get('/berlin'))).toMatchObject({ status: 200, policy: '"daily";q=2;w=90000', ratelimit: '"daily";r=1;t=90000' });
    await get('/berlin');
    expect(quota(await get('/berlin'))).toMatchObject({ status: 429, retryAfter: '90000' });
  });

  it('Asia/Kolkata, February 2027, a month of 28 days: w=2419200', async () => {
    clock.set(1803839400 * S - 10 * S); // 2027-02-28 23:59:50 IST
    expect(quota(await get('/kolkata-month'))).toMatchObject({
      status: 200,
      policy: '"daily";q=2;w=2419200',
      ratelimit: '"daily";r=1;t=10',
    });
  });

  it('Australia/Lord_Howe, 2026-10-04, a 23.5-hour day (a 30-minute DST change)', async () => {
    clock.set(1791075600 * S); // 12:00 local, +11
    expect(quota(await get('/lord-howe'))).toMatchObject({ status: 200, policy: '"daily";q=2;w=84600', ratelimit: '"daily";r=1;t=43200' });
  });

  it('a window from the request: each client counts its own day in its own zone', async () => {
    clock.set(1772985600 * S); // 2026-03-08 16:00 UTC: 12:00 in New York, 21:30 in Kolkata
    expect(quota(await get('/mine', 'America/New_York'))).toMatchObject({
      policy: '"daily";q=2;w=82800',
      ratelimit: '"daily";r=1;t=43200',
    });
    expect(quota(await get('/mine', 'Asia/Kolkata'))).toMatchObject({ policy: '"daily";q=2;w=86400', ratelimit: '"daily";r=1;t=9000' });
  });

  it('a zone from the request that does not exist fails that request with a 500 naming the field', async () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      expect((await get('/mine', 'Mars/Olympus_Mons')).status).toBe(500);
      expect(logged.mock.calls.map(([message]) => String(message))).toContainEqual(
        expect.stringContaining(
          `@RateLimit on ReportsController.mine: window: timeZone "Mars/Olympus_Mons" is not a time zone this runtime knows`,
        ),
      );
    } finally {
      logged.mockRestore();
    }
  });
});

describe.each(ADAPTERS)('calendar windows over HTTP on %s, Redis store', (adapter) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  beforeAll(async () => {
    app = await bootApp({ adapter, imports: [await rateLimitModule('redis', redis)], controllers: [ReportsController] });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  it('counts to the next local midnight on the Redis clock (Asia/Kolkata, UTC+5:30 all year)', async () => {
    // Redis runs on this machine: its TIME lies between these two readings of ours.
    const IST = 5.5 * H;
    const before = Date.now();
    const responses = [];
    for (let i = 0; i < 3; i++) responses.push(await request(app.getHttpServer()).get('/mine').set('x-tz', 'Asia/Kolkata'));
    const after = Date.now();
    const end = Math.floor((after + IST) / D) * D + D - IST;
    // Between the two readings the day may not end (it would be a 1-in-20,000 coincidence): then t is exact.
    expect(Math.floor((before + IST) / D)).toBe(Math.floor((after + IST) / D));
    const t = (ms: number) => Math.ceil((end - ms) / S);
    const member = (r: request.Response) => /^"daily";r=(\d);t=(\d+)$/.exec(r.headers['ratelimit'])!.slice(1).map(Number);
    expect(responses.map((r) => [r.status, r.headers['ratelimit-policy']])).toEqual([
      [200, '"daily";q=2;w=86400'],
      [200, '"daily";q=2;w=86400'],
      [429, '"daily";q=2;w=86400'],
    ]);
    for (const [i, r] of responses.entries()) {
      const [remaining, seconds] = member(r);
      expect(remaining).toBe([1, 0, 0][i]);
      expect(seconds).toBeGreaterThanOrEqual(t(after));
      expect(seconds).toBeLessThanOrEqual(t(before));
    }
    const retryAfter = Number(responses[2].headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(t(after));
    expect(retryAfter).toBeLessThanOrEqual(t(before));
  });
});

describe.each(ADAPTERS)('calendar window validation at bootstrap on %s', (adapter) => {
  const boot = (controller: Type<unknown>) =>
    bootApp({ adapter, imports: [RateLimitModule.forRoot()], controllers: [controller] }).then(async (app) => {
      await app.close();
      throw new Error('the app booted');
    });

  it('refuses an unknown zone, naming the route and the field', async () => {
    @Controller()
    class BadZone {
      @Get()
      @calendar({ calendar: 'day', timeZone: 'Europe/Pariss' })
      index() {
        return 'ok';
      }
    }
    await expect(boot(BadZone)).rejects.toThrow(
      `@RateLimit on BadZone.index: window: timeZone "Europe/Pariss" is not a time zone this runtime knows; use an IANA name such as 'Europe/Paris' or 'America/New_York' (Intl.supportedValuesOf('timeZone') lists them), or 'UTC'.`,
    );
  });

  it('refuses a calendar window on another algorithm', async () => {
    @Controller()
    class NotFixed {
      @Get()
      @RateLimit({ algorithm: 'gcra', limit: 10, window: { calendar: 'day' } })
      index() {
        return 'ok';
      }
    }
    await expect(boot(NotFixed)).rejects.toThrow(
      `@RateLimit on NotFixed.index: window: a calendar window is for 'fixed-window' only; 'gcra' takes a duration such as '1d' (a number of ms or '250ms', '1s', '1m', '1h', '1d').`,
    );
  });
});

describe.each(ADAPTERS)('the sample app’s GET /reports on %s', (adapter) => {
  let app: INestApplication;
  const previous = process.env.REDIS_URL;
  beforeAll(async () => {
    delete process.env.REDIS_URL;
    // The memory store on a clock fixed at 2026-03-29 12:00 in Paris, a 23-hour day, in a 31-day March.
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(RATE_LIMIT_STORE)
      .useValue(new MemoryStore({ clock: () => 1774778400 * S }))
      .compile();
    app = await initApp(moduleRef.createNestApplication.bind(moduleRef), adapter);
  });
  afterAll(async () => {
    await app.close();
    if (previous !== undefined) process.env.REDIS_URL = previous;
  });

  it('counts per calendar day in Paris and per calendar month, with exact w and t', async () => {
    const res = await request(app.getHttpServer()).get('/reports').set('x-api-key', 'demo-pro');
    expect(quota(res)).toEqual({
      status: 200,
      // `TZ=Europe/Paris date -d '2026-03-30 00:00' +%s` is 1774821600: 12 h to go; April starts 223200 s later.
      policy: '"daily";q=1000;w=82800, "monthly";q=50000;w=2678400',
      ratelimit: '"daily";r=999;t=43200, "monthly";r=49999;t=223200',
      retryAfter: undefined,
    });
  });
});
