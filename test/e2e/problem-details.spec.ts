/**
 * `errorFormat: 'problem+json'`: a controller call's 429 is RFC 9457 problem details of the IETF RateLimit
 * draft's `quota-exceeded` type, sent as `application/problem+json` on Express and Fastify alike (both
 * frameworks and Nest's exception filter would otherwise send `application/json`), with the same
 * `Retry-After` and `RateLimit` headers as the default JSON body; a `fail-closed` 503 is `about:blank`.
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions, type RateLimitPolicy } from '../../lib';
import { RateLimitTestingModule } from '../../lib/testing';
import { ADAPTERS, bootApp, redisPerTest, clearOfMinuteEnd } from './harness';

// Some policies here count in aligned 1-minute windows on the real clock.
beforeEach(() => clearOfMinuteEnd());

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
const ONE_A_MINUTE: RateLimitPolicy = { name: 'minute', algorithm: 'fixed-window', limit: 1, window: '1m' };
const ONE_AN_HOUR: RateLimitPolicy = { name: 'hour', algorithm: 'fixed-window', limit: 1, window: '1h' };

@Controller()
class ProblemController {
  @Get('one')
  @RateLimit(ONE_A_MINUTE)
  one() {
    return 'one';
  }

  @Get('both')
  @RateLimit([ONE_A_MINUTE, ONE_AN_HOUR])
  both() {
    return 'both';
  }

  @Get('first')
  @RateLimit([ONE_A_MINUTE, { ...ONE_AN_HOUR, limit: 5 }, { ...ONE_AN_HOUR, name: 'trial', mode: 'shadow' }])
  first() {
    return 'first';
  }

  @Get('huge')
  // A cost function: a fixed cost above the capacity fails at bootstrap, one known only per request is rejected.
  @RateLimit({ name: 'big', algorithm: 'token-bucket', limit: 2, window: '1s', cost: () => 5 })
  huge() {
    return 'huge';
  }
}

/** Status, `Content-Type`, `Retry-After`, `RateLimit` and the body parsed from the bytes on the wire. */
const seen = (res: request.Response) => ({
  status: res.status,
  contentType: res.headers['content-type'],
  retryAfter: res.headers['retry-after'],
  rateLimit: res.headers['ratelimit'],
  body: JSON.parse(res.text) as unknown,
});

describe.each(ADAPTERS)("errorFormat: 'problem+json' on %s", (adapter) => {
  let app: INestApplication;
  const boot = async (options: RateLimitModuleOptions) => {
    app = await bootApp({ adapter, imports: [RateLimitTestingModule.forRoot(options)], controllers: [ProblemController] });
  };
  afterEach(() => app.close());
  const get = (path: string) => request(app.getHttpServer()).get(path);

  it('answers a 429 as application/problem+json of the quota-exceeded type, headers unchanged', async () => {
    await boot({ errorFormat: 'problem+json' });
    const allowed = await get('/one');
    expect(allowed.status).toBe(200);
    expect(allowed.text).toBe('one');
    expect(seen(await get('/one'))).toEqual({
      status: 429,
      contentType: 'application/problem+json; charset=utf-8',
      retryAfter: '60',
      rateLimit: '"minute";r=0;t=60',
      body: { type: QUOTA_EXCEEDED, title: 'Quota Exceeded', status: 429, detail: 'Too Many Requests', 'violated-policies': ['minute'] },
    });
  });

  it('lists every policy that rejected, and only those (not the one that had room, nor a shadow policy)', async () => {
    await boot({ errorFormat: 'problem+json' });
    await get('/both');
    expect((seen(await get('/both')).body as Record<string, unknown>)['violated-policies']).toEqual(['minute', 'hour']);
    await get('/first');
    const rejected = seen(await get('/first'));
    // draft-11: RateLimit lists the same set as violated-policies, no window outlasting Retry-After.
    expect(rejected.rateLimit).toBe('"minute";r=0;t=60');
    expect(rejected.body).toEqual({
      type: QUOTA_EXCEEDED,
      title: 'Quota Exceeded',
      status: 429,
      detail: 'Too Many Requests',
      'violated-policies': ['minute'],
    });
  });

  it('under draft-10, RateLimit still lists every policy beside violated-policies', async () => {
    await boot({ errorFormat: 'problem+json', headerProfile: 'draft-10' });
    await get('/first');
    const rejected = seen(await get('/first'));
    expect(rejected.rateLimit).toBe('"minute";r=0;t=60, "hour";r=4;t=3600');
    expect((rejected.body as Record<string, unknown>)['violated-policies']).toEqual(['minute']);
  });

  it('puts errorMessage in detail, and says why a request that can never fit is rejected (no Retry-After)', async () => {
    await boot({
      errorFormat: 'problem+json',
      errorMessage: (context, decisions) => `${context.getHandler().name}: ${decisions.find((d) => !d.allowed)?.policy} is used up`,
    });
    await get('/one');
    expect(seen(await get('/one')).body).toMatchObject({ detail: 'one: minute is used up', 'violated-policies': ['minute'] });
    expect(seen(await get('/huge'))).toEqual({
      status: 429,
      contentType: 'application/problem+json; charset=utf-8',
      retryAfter: undefined,
      rateLimit: '"big";r=2;t=0',
      body: {
        type: QUOTA_EXCEEDED,
        title: 'Quota Exceeded',
        status: 429,
        detail: "huge: big is used up: this request costs more than policy 'big' can ever allow (capacity 2), so retrying will not help.",
        'violated-policies': ['big'],
      },
    });
  });

  it("keeps the JSON body by default ('json')", async () => {
    await boot({});
    await get('/one');
    expect(seen(await get('/one'))).toEqual({
      status: 429,
      contentType: 'application/json; charset=utf-8',
      retryAfter: '60',
      rateLimit: '"minute";r=0;t=60',
      body: { statusCode: 429, message: 'Too Many Requests', error: 'Too Many Requests', retryAfter: 60 },
    });
  });
});

describe.each(ADAPTERS)("errorFormat: 'problem+json' with the Redis store down, on %s", (adapter) => {
  const redis = redisPerTest();
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
  });

  it('answers a fail-closed 503 as about:blank problem details', async () => {
    app = await bootApp({
      adapter,
      imports: [
        RateLimitModule.forRoot({ redis: redis.client, storeTimeoutMs: 50, onStoreError: 'fail-closed', errorFormat: 'problem+json' }),
      ],
      controllers: [ProblemController],
    });
    await redis.server.stop();
    const res = seen(await request(app.getHttpServer()).get('/one'));
    expect(res).toEqual({
      status: 503,
      contentType: 'application/problem+json; charset=utf-8',
      retryAfter: undefined,
      rateLimit: undefined,
      body: { type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'Rate limit store unavailable' },
    });
  });
});
