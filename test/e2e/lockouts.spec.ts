import { Controller, Get, HttpCode, Post, type ExecutionContext, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, RateLimiterService } from '../../lib';
import { RateLimitTestClock, RateLimitTestingModule } from '../../lib/testing';
import { fieldMembers, secondsOver, timed } from '../support/rate-limit-fields';
import { ADAPTERS, bootApp, MATRIX, rateLimitModule, SharedRedis, sleep, clearOfMinuteEnd } from './harness';

// Some policies here count in aligned 1-minute windows on the real clock.
beforeEach(() => clearOfMinuteEnd());

/** The caller named by the `x-user` header (the default IP tracker without one). */
const byUser = (context: ExecutionContext) => context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-user'];

@Controller()
class LockoutsController {
  /** Two attempts a minute; a 1-minute lockout, doubling per offence up to 5 minutes, forgiven after an hour. */
  @Post('login')
  @HttpCode(200)
  @RateLimit({
    name: 'login',
    algorithm: 'fixed-window',
    limit: 2,
    window: '1m',
    blockFor: '1m',
    escalate: { max: '5m', forgiveAfter: '1h' },
    by: byUser,
  })
  login() {
    return 'welcome';
  }

  /** One per second, then 1 s, 2 s, 4 s … lockouts: short enough for a real Redis. */
  @Post('quick')
  @HttpCode(200)
  @RateLimit({
    name: 'quick',
    algorithm: 'gcra',
    limit: 1,
    window: '1s',
    blockFor: '1s',
    escalate: { max: '10s', forgiveAfter: '1m' },
    by: byUser,
  })
  quick() {
    return 'quick';
  }

  @Get('a')
  @RateLimit({ name: 'a', algorithm: 'gcra', limit: 5, window: '1m', by: byUser })
  a() {
    return 'a';
  }

  /** Two trackers on one route: the user's and the client IP's, each decided (and denied) on its own. */
  @Get('b')
  @RateLimit([
    { name: 'b', algorithm: 'sliding-window', limit: 5, window: '1m', by: byUser },
    { name: 'ip', algorithm: 'fixed-window', limit: 5, window: '1m' },
  ])
  b() {
    return 'b';
  }
}

describe.each(ADAPTERS)('escalating lockouts over HTTP on %s (testing module, exact)', (adapter) => {
  let app: INestApplication;
  let clock: RateLimitTestClock;
  beforeEach(async () => {
    app = await bootApp({ adapter, imports: [RateLimitTestingModule.forRoot()], controllers: [LockoutsController] });
    clock = app.get(RateLimitTestClock);
  });
  afterEach(() => app.close());

  /** Two logins that pass, then the one that starts a lockout: its Retry-After, in seconds. */
  async function offence(user = 'ann'): Promise<string> {
    const login = () => request(app.getHttpServer()).post('/login').set('x-user', user);
    expect((await login()).status).toBe(200);
    expect((await login()).status).toBe(200);
    const rejected = await login();
    expect(rejected.status).toBe(429);
    expect(rejected.headers['ratelimit']).toBe(`"login";r=0;t=${rejected.headers['retry-after']}`);
    expect(rejected.body).toEqual({
      statusCode: 429,
      message: 'Too Many Requests',
      error: 'Too Many Requests',
      retryAfter: Number(rejected.headers['retry-after']),
    });
    return rejected.headers['retry-after'] as string;
  }

  it('answers 60, 120, 240 s, then the 300 s cap, then 60 s again once an hour has passed quietly', async () => {
    const waits = [];
    for (const seconds of [60, 120, 240, 300]) {
      waits.push(await offence());
      clock.advance(seconds * 1_000);
    }
    expect(waits).toEqual(['60', '120', '240', '300']);
    expect(await offence('bob')).toBe('60');
    clock.advance('59m');
    clock.advance(59_999);
    expect(await offence()).toBe('300');
    clock.advance('5m');
    clock.advance('1h');
    expect(await offence()).toBe('60');
  });

  it('locks out for the whole lockout: one request before its end is still a 429 with the time left', async () => {
    await offence();
    clock.advance('1m');
    await offence();
    clock.advance(119_000);
    const res = await request(app.getHttpServer()).post('/login').set('x-user', 'ann');
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
  });
});

describe.each(ADAPTERS)('escalating lockouts over HTTP on %s with a real Redis', (adapter) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  beforeAll(async () => {
    app = await bootApp({ adapter, imports: [await rateLimitModule('redis', redis)], controllers: [LockoutsController] });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  it('answers Retry-After 1 then 2: the second lockout is twice the first', async () => {
    const quick = () => request(app.getHttpServer()).post('/quick').set('x-user', 'ann');
    expect((await quick()).status).toBe(200);
    const first = await quick();
    expect([first.status, first.headers['retry-after'], first.headers['ratelimit']]).toEqual([429, '1', '"quick";r=0;t=1']);
    await sleep(1_050);
    expect((await quick()).status).toBe(200);
    const second = await quick();
    expect([second.status, second.headers['retry-after'], second.headers['ratelimit']]).toEqual([429, '2', '"quick";r=0;t=2']);
  });
});

describe.each(MATRIX)('deny list over HTTP on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let limiter: RateLimiterService;
  beforeEach(async () => {
    app = await bootApp({ adapter, imports: [await rateLimitModule(store, redis)], controllers: [LockoutsController] });
    limiter = app.get(RateLimiterService);
  });
  afterEach(() => app.close());
  afterAll(() => redis.stop());
  const get = (path: string, user: string) => request(app.getHttpServer()).get(path).set('x-user', user);

  it('rejects every route of a denied tracker as a lockout until allow(), and charges none of them', async () => {
    await limiter.deny('ann', '1h', 'abuse from 203.0.113.7');
    for (const path of ['/a', '/b']) {
      const res = await get(path, 'ann');
      expect(res.status).toBe(429);
      expect(res.headers['retry-after']).toBe('3600');
      // The reason stays with the operator.
      expect(res.body).toEqual({ statusCode: 429, message: 'Too Many Requests', error: 'Too Many Requests', retryAfter: 3600 });
    }
    expect((await request(app.getHttpServer()).post('/login').set('x-user', 'ann')).status).toBe(429);
    expect((await get('/a', 'ann')).headers['ratelimit']).toBe('"a";r=0;t=3600');
    expect((await get('/a', 'bob')).status).toBe(200);
    expect((await limiter.denied('ann'))?.reason).toBe('abuse from 203.0.113.7');

    await limiter.allow('ann');
    // gcra 5 per minute: one unit comes back every 12 s.
    expect(fieldMembers((await get('/a', 'ann')).headers['ratelimit'])).toEqual([{ name: 'a', r: 4, t: 12 }]);
    // The IP policy of /b passed during the deny, and was given back when the user's was denied.
    const { res, before, after } = await timed(() => get('/b', 'ann'));
    const members = fieldMembers(res.headers['ratelimit'])!;
    expect(members).toEqual([
      { name: 'b', r: 4, t: expect.any(Number) },
      { name: 'ip', r: 4, t: expect.any(Number) },
    ]);
    // sliding-window: the hit weighs until it has left the previous window too; fixed-window: the window's end.
    expect(secondsOver(before, after, (now) => 120_000 - (now % 60_000))).toContain(members[0].t);
    expect(secondsOver(before, after, (now) => 60_000 - (now % 60_000))).toContain(members[1].t);
  });

  it("reads each tracker's deny on a route with two: denying the IP rejects /b for every user, not /a", async () => {
    await limiter.deny('ip:127.0.0.1', '10m');
    const res = await get('/b', 'carl');
    expect([res.status, res.headers['retry-after']]).toEqual([429, '600']);
    expect((await get('/a', 'carl')).status).toBe(200);
  });
});
