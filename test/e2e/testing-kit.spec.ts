import { Controller, Get, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, RateLimiterService } from '../../lib';
import {
  RATE_LIMIT_TEST_START,
  RateLimitTestClock,
  RateLimitTestingModule,
  expectNotRateLimited,
  expectRateLimited,
} from '../../lib/testing';
import { ADAPTERS, bootApp } from './harness';

@Controller()
class KitController {
  /** Limited by the defaultPolicy given to RateLimitTestingModule.forRoot. */
  @Get()
  index() {
    return 'index';
  }

  @Get('bucket')
  @RateLimit({ name: 'bucket', algorithm: 'token-bucket', limit: 10, window: '10s' })
  bucket() {
    return 'bucket';
  }

  @Get('login')
  @RateLimit({ name: 'login', algorithm: 'fixed-window', limit: 1, window: '1s', blockFor: '10m' })
  login() {
    return 'login';
  }
}

/** Our own e2e suite written with the testing kit users get: no Redis, no sleeping, exact numbers. */
describe.each(ADAPTERS)('RateLimitTestingModule on %s', (adapter) => {
  let app: INestApplication;
  let clock: RateLimitTestClock;
  beforeEach(async () => {
    app = await bootApp({
      adapter,
      imports: [RateLimitTestingModule.forRoot({ defaultPolicy: { algorithm: 'fixed-window', limit: 2, window: '1m' } })],
      controllers: [KitController],
    });
    clock = app.get(RateLimitTestClock);
  });
  afterEach(() => app.close());
  const get = (path: string) => request(app.getHttpServer()).get(path);

  it('starts the clock at a fixed time and keeps it still until the test moves it', async () => {
    expect(clock.now()).toBe(RATE_LIMIT_TEST_START);
    await get('/');
    expect(clock.now()).toBe(Date.parse('2025-01-01T00:00:00.000Z'));
  });

  it('advancing the clock past the window lets requests through again', async () => {
    expectNotRateLimited(await get('/'), { policy: 'default', remaining: 1 });
    expectNotRateLimited(await get('/'), { policy: 'default', remaining: 0 });
    expectRateLimited(await get('/'), { retryAfter: 60, policy: 'default', remaining: 0 });

    clock.advance(59_999);
    expectRateLimited(await get('/'), { retryAfter: 1, policy: 'default', remaining: 0 });
    clock.advance(1);
    const next = expectNotRateLimited(await get('/'), { policy: 'default', remaining: 1 });
    expect(next.quotas).toEqual([{ policy: 'default', remaining: 1, resetSeconds: 60 }]);
    expect(next.policies).toEqual([{ policy: 'default', quota: 2, windowSeconds: 60 }]);
  });

  it('refills a token bucket exactly with the clock', async () => {
    for (let i = 9; i >= 0; i--) expectNotRateLimited(await get('/bucket'), { policy: 'bucket', remaining: i });
    expectRateLimited(await get('/bucket'), { retryAfter: 1, policy: 'bucket', remaining: 0 });
    clock.advance('3s');
    for (let i = 2; i >= 0; i--) expectNotRateLimited(await get('/bucket'), { policy: 'bucket', remaining: i });
    expectRateLimited(await get('/bucket'), { retryAfter: 1 });
  });

  it('ends a 10-minute lockout without waiting 10 minutes', async () => {
    expectNotRateLimited(await get('/login'));
    expectRateLimited(await get('/login'), { retryAfter: 600, policy: 'login' });
    clock.advance('9m');
    expectRateLimited(await get('/login'), { retryAfter: 60 });
    clock.advance('1m');
    expectNotRateLimited(await get('/login'), { policy: 'login', remaining: 0 });
  });

  it('drives RateLimiterService too', async () => {
    const limiter = app.get(RateLimiterService);
    const policy = { algorithm: 'gcra', limit: 2, window: '1s' } as const;
    expect((await limiter.consume(policy, 'job')).allowed).toBe(true);
    expect((await limiter.consume(policy, 'job')).allowed).toBe(true);
    expect(await limiter.consume(policy, 'job')).toMatchObject({ allowed: false, retryAfterMs: 500 });
    clock.advance(500);
    expect((await limiter.consume(policy, 'job')).allowed).toBe(true);
  });

  it('the assertions say what differs', async () => {
    const ok = await get('/');
    expect(() => expectRateLimited(ok)).toThrow(
      new Error('expectRateLimited: expected status 429 Too Many Requests, got 200 (status 200; RateLimit: "default";r=1;t=60).'),
    );
    expect(() => expectNotRateLimited(ok, { policy: 'plan' })).toThrow(
      new Error(
        `expectNotRateLimited: expected policy 'plan' in the RateLimit header, found 'default' (status 200; RateLimit: "default";r=1;t=60).`,
      ),
    );
    await get('/');
    const limited = await get('/');
    expect(() => expectNotRateLimited(limited)).toThrow(
      new Error(
        'expectNotRateLimited: expected a response that is not rate-limited, got 429 with Retry-After 60 (status 429; Retry-After: 60; RateLimit: "default";r=0;t=60).',
      ),
    );
    expect(() => expectRateLimited(limited, { retryAfter: 30 })).toThrow(
      new Error('expectRateLimited: expected Retry-After 30, got 60 (status 429; Retry-After: 60; RateLimit: "default";r=0;t=60).'),
    );
    expect(() => expectRateLimited(limited, { remaining: 1 })).toThrow(
      new Error('expectRateLimited: expected 1 remaining, got 0 (status 429; Retry-After: 60; RateLimit: "default";r=0;t=60).'),
    );
  });
});

describe('RateLimitTestingModule options', () => {
  it('starts the clock where asked, gives each app its own clock, and passes module options through (legacy headers)', async () => {
    const startAt = Date.UTC(2030, 5, 1, 12, 0, 30);
    const boot = () =>
      bootApp({
        adapter: 'express',
        imports: [
          RateLimitTestingModule.forRoot({
            startAt,
            headers: 'legacy',
            defaultPolicy: { algorithm: 'fixed-window', limit: 1, window: '1m' },
          }),
        ],
        controllers: [KitController],
      });
    const [a, b] = [await boot(), await boot()];
    try {
      a.get(RateLimitTestClock).advance('1h');
      expect(a.get(RateLimitTestClock).now()).toBe(startAt + 3_600_000);
      expect(b.get(RateLimitTestClock).now()).toBe(startAt);
      // 30 s into the minute: the fixed window resets in 30 s.
      const first = expectNotRateLimited(await request(b.getHttpServer()).get('/'), { remaining: 0 });
      expect(first.legacy).toEqual({ limit: 1, remaining: 0, resetSeconds: 30 });
      expect(first.quotas).toEqual([]);
      expectRateLimited(await request(b.getHttpServer()).get('/'), { retryAfter: 30, remaining: 0 });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('rejects a bad clock value with a message that says what to pass', () => {
    expect(() => new RateLimitTestClock(Number.NaN)).toThrow(
      new Error('startAt: NaN is not a time; pass milliseconds since the epoch (a finite number ≥ 0), e.g. Date.UTC(2025, 0, 1).'),
    );
    expect(() => new RateLimitTestClock().advance(-5)).toThrow(/RateLimitTestClock.advance: -5 is not a valid duration/);
  });
});
