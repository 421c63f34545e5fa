/**
 * `@RateLimit` overriding some fields of an inherited policy (as `@Throttle({ short: { limit: 20 } })` does in
 * @nestjs/throttler): the overridden policy keeps every other field, the route's other inherited policies keep
 * applying; complete policies given along with an override replace the inherited one of their name or are
 * added; complete policies alone, and the positional shorthand, replace what the route inherits as before.
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, SkipRateLimit, type RateLimitPolicy } from '../../lib';
import { RateLimitTestClock, RateLimitTestingModule } from '../../lib/testing';
import { ADAPTERS, bootApp, rateLimitModule, SharedRedis, storeOptions, clearOfMinuteEnd } from './harness';

// Some policies here count in aligned 1-minute windows on the real clock.
beforeEach(() => clearOfMinuteEnd());

// A token bucket and a fixed window: an override that lost the algorithm or the window would show in the
// headers (`w` is a bucket's refill time, a fixed window's length) and in when quota comes back.
const BURST: RateLimitPolicy = { name: 'burst', algorithm: 'token-bucket', limit: 2, window: '10s' };
const HOURLY: RateLimitPolicy = { name: 'hourly', algorithm: 'fixed-window', limit: 5, window: '1h' };

@Controller('defaults')
class DefaultsController {
  @Get()
  plain() {
    return 'plain';
  }

  @Get('more')
  @RateLimit({ name: 'burst', limit: 4 })
  more() {
    return 'more';
  }

  @Get('added')
  @RateLimit([
    { name: 'burst', limit: 1 },
    { name: 'minute', algorithm: 'sliding-log', limit: 2, window: '1m' },
  ])
  added() {
    return 'added';
  }

  @Get('replaced')
  @RateLimit([
    { name: 'hourly', limit: 1 },
    { name: 'burst', algorithm: 'fixed-window', limit: 3, window: '1m' },
  ])
  replaced() {
    return 'replaced';
  }

  @Get('complete')
  @RateLimit({ name: 'solo', algorithm: 'fixed-window', limit: 1, window: '1m' })
  complete() {
    return 'complete';
  }

  @Get('positional')
  @RateLimit('fixed-window', 1, '1m', { name: 'burst' })
  positional() {
    return 'positional';
  }

  @Get('skip')
  @SkipRateLimit('hourly')
  @RateLimit({ name: 'burst', limit: 3 })
  skip() {
    return 'skip';
  }
}

/** A class-level override; its handlers' overrides are layered over it, field by field. */
@Controller('layered')
@RateLimit({ name: 'hourly', limit: 3 })
class LayeredController {
  @Get()
  inherited() {
    return 'inherited';
  }

  @Get('burst')
  @RateLimit({ name: 'burst', window: '20s' })
  burst() {
    return 'burst';
  }

  @Get('hourly')
  @RateLimit({ name: 'hourly', window: '1m' })
  hourly() {
    return 'hourly';
  }
}

/** A class with complete policies of its own: a handler's override changes those, not the module's. */
@Controller('own')
@RateLimit([
  { name: 'a', algorithm: 'sliding-log', limit: 3, window: '1m' },
  { name: 'b', algorithm: 'gcra', limit: 10, window: '1m' },
])
class OwnPoliciesController {
  @Get()
  @RateLimit({ name: 'a', limit: 1 })
  get() {
    return 'own';
  }
}

/** A class exempt from every policy: a handler's override brings the module's policies back for it. */
@Controller('exempt')
@SkipRateLimit()
class ExemptController {
  @Get()
  free() {
    return 'free';
  }

  @Get('limited')
  @RateLimit({ name: 'burst', limit: 1 })
  limited() {
    return 'limited';
  }
}

const CONTROLLERS = [DefaultsController, LayeredController, OwnPoliciesController, ExemptController];

describe.each(ADAPTERS)('overriding inherited policies on %s (test clock)', (adapter) => {
  let app: INestApplication;
  let clock: RateLimitTestClock;
  beforeEach(async () => {
    app = await bootApp({
      adapter,
      // The fields as draft-10 writes them (every policy listed, a bucket's t when its next unit comes).
      imports: [RateLimitTestingModule.forRoot({ defaultPolicy: [BURST, HOURLY], headerProfile: 'draft-10' })],
      controllers: CONTROLLERS,
    });
    clock = app.get(RateLimitTestClock);
  });
  afterEach(() => app.close());
  const get = (path: string) => request(app.getHttpServer()).get(path);
  /** Status, `RateLimit` and `Retry-After` of one call. */
  const call = async (path: string) => {
    const res = await get(path);
    return [res.status, res.headers['ratelimit'], res.headers['retry-after']];
  };

  it("an override of 'burst' keeps its algorithm and window, and 'hourly' keeps applying", async () => {
    const first = await get('/defaults/more');
    expect(first.headers['ratelimit-policy']).toBe('"burst";q=4;w=10, "hourly";q=5;w=3600');
    // Bucket of 4 refilling one unit per 2.5 s (t=3); the fixed hour ends in 3600 s.
    expect([first.status, first.headers['ratelimit']]).toEqual([200, '"burst";r=3;t=3, "hourly";r=4;t=3600']);
    expect(await call('/defaults/more')).toEqual([200, '"burst";r=2;t=3, "hourly";r=3;t=3600', undefined]);
    expect(await call('/defaults/more')).toEqual([200, '"burst";r=1;t=3, "hourly";r=2;t=3600', undefined]);
    expect(await call('/defaults/more')).toEqual([200, '"burst";r=0;t=3, "hourly";r=1;t=3600', undefined]);
    // The bucket is empty; 'hourly' is not charged for a rejected call.
    expect(await call('/defaults/more')).toEqual([429, '"burst";r=0;t=3, "hourly";r=1;t=3600', '3']);
    clock.advance(2_500); // one unit back, as a bucket refills
    expect(await call('/defaults/more')).toEqual([200, '"burst";r=0;t=3, "hourly";r=0;t=3598', undefined]);
    clock.advance(2_500);
    // 'hourly' (5 an hour, from the module) now rejects, until the hour is over.
    expect(await call('/defaults/more')).toEqual([429, '"burst";r=1;t=3, "hourly";r=0;t=3595', '3595']);
  });

  it('a route without @RateLimit has the module policies as they are, and its own counters', async () => {
    const res = await get('/defaults');
    expect(res.headers['ratelimit-policy']).toBe('"burst";q=2;w=10, "hourly";q=5;w=3600');
    expect([res.status, res.headers['ratelimit']]).toEqual([200, '"burst";r=1;t=5, "hourly";r=4;t=3600']);
    expect(await call('/defaults')).toEqual([200, '"burst";r=0;t=5, "hourly";r=3;t=3600', undefined]);
    expect(await call('/defaults')).toEqual([429, '"burst";r=0;t=5, "hourly";r=3;t=3600', '5']);
  });

  it('a complete policy given with an override is added after the inherited ones', async () => {
    const first = await get('/defaults/added');
    expect(first.headers['ratelimit-policy']).toBe('"burst";q=1;w=10, "hourly";q=5;w=3600, "minute";q=2;w=60');
    expect(first.status).toBe(200);
    expect(await call('/defaults/added')).toEqual([429, '"burst";r=0;t=10, "hourly";r=4;t=3600, "minute";r=1;t=60', '10']);
    clock.advance(10_000);
    expect(await call('/defaults/added')).toEqual([200, '"burst";r=0;t=10, "hourly";r=3;t=3590, "minute";r=0;t=50', undefined]);
    clock.advance(10_000);
    // 'minute' (sliding-log) is full until the first call is a minute old.
    expect(await call('/defaults/added')).toEqual([429, '"burst";r=1;t=0, "hourly";r=3;t=3580, "minute";r=0;t=40', '40']);
  });

  it('a complete policy given with an override replaces the inherited policy of its name, in its place', async () => {
    const first = await get('/defaults/replaced');
    expect(first.headers['ratelimit-policy']).toBe('"burst";q=3;w=60, "hourly";q=1;w=3600');
    expect([first.status, first.headers['ratelimit']]).toEqual([200, '"burst";r=2;t=60, "hourly";r=0;t=3600']);
    expect(await call('/defaults/replaced')).toEqual([429, '"burst";r=2;t=60, "hourly";r=0;t=3600', '3600']);
  });

  it('complete policies alone, and the positional shorthand, replace the inherited ones', async () => {
    const complete = [await get('/defaults/complete'), await get('/defaults/complete')];
    expect(complete.map((r) => r.status)).toEqual([200, 429]);
    expect(complete[0].headers['ratelimit-policy']).toBe('"solo";q=1;w=60');
    const positional = [await get('/defaults/positional'), await get('/defaults/positional')];
    expect(positional.map((r) => r.status)).toEqual([200, 429]);
    expect(positional[0].headers['ratelimit-policy']).toBe('"burst";q=1;w=60');
  });

  it("@SkipRateLimit('hourly') applies to the policies an override leaves", async () => {
    const first = await get('/defaults/skip');
    expect(first.headers['ratelimit-policy']).toBe('"burst";q=3;w=10');
    expect(await call('/defaults/skip')).toEqual([200, '"burst";r=1;t=4', undefined]);
    expect(await call('/defaults/skip')).toEqual([200, '"burst";r=0;t=4', undefined]);
    expect(await call('/defaults/skip')).toEqual([429, '"burst";r=0;t=4', '4']);
  });

  it("a class's override applies to its handlers; a handler's override is layered over it", async () => {
    const expected: Array<[string, string]> = [
      ['/layered', '"burst";q=2;w=10, "hourly";q=3;w=3600'],
      ['/layered/burst', '"burst";q=2;w=20, "hourly";q=3;w=3600'],
      ['/layered/hourly', '"burst";q=2;w=10, "hourly";q=3;w=60'],
    ];
    for (const [path, policies] of expected) {
      expect((await get(path)).headers['ratelimit-policy']).toBe(policies);
    }
    // The class's limit of 3 with the handler's window of 1 m: a fixed minute from 00:00.
    expect(await call('/layered/hourly')).toEqual([200, '"burst";r=0;t=5, "hourly";r=1;t=60', undefined]);
    clock.advance(10_000);
    expect(await call('/layered/hourly')).toEqual([200, '"burst";r=1;t=5, "hourly";r=0;t=50', undefined]);
    clock.advance(10_000);
    expect(await call('/layered/hourly')).toEqual([429, '"burst";r=2;t=0, "hourly";r=0;t=40', '40']);
  });

  it("under a class's @SkipRateLimit(), a handler's override limits it with the module's policies", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await get('/exempt');
      expect([res.status, res.headers['ratelimit-policy']]).toEqual([200, undefined]);
    }
    const first = await get('/exempt/limited');
    expect([first.status, first.headers['ratelimit-policy']]).toEqual([200, '"burst";q=1;w=10, "hourly";q=5;w=3600']);
    expect(await call('/exempt/limited')).toEqual([429, '"burst";r=0;t=10, "hourly";r=4;t=3600', '10']);
  });

  it("a handler's override changes the class's own policies; the module's do not come back", async () => {
    const first = await get('/own');
    expect(first.headers['ratelimit-policy']).toBe('"a";q=1;w=60, "b";q=10;w=60');
    expect(first.status).toBe(200);
    expect(await call('/own')).toEqual([429, '"a";r=0;t=60, "b";r=9;t=6', '60']);
  });
});

describe.each(ADAPTERS)('overriding inherited policies on %s with the Redis store', (adapter) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let prefix: string;
  beforeAll(async () => {
    prefix = (await storeOptions('redis', redis)).prefix!;
    app = await bootApp({
      adapter,
      // A bucket refilling one unit per 15 minutes: no refill between the calls, however slow the machine.
      imports: [
        await rateLimitModule('redis', redis, { prefix, defaultPolicy: [{ ...BURST, window: '1h' }, HOURLY], headerProfile: 'draft-10' }),
      ],
      controllers: CONTROLLERS,
    });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  it('the merged policy is decided by Redis with its own algorithm, next to the untouched one', async () => {
    const responses = [];
    for (let i = 0; i < 5; i++) responses.push(await request(app.getHttpServer()).get('/defaults/more'));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200, 429]);
    expect(responses[0].headers['ratelimit-policy']).toBe('"burst";q=4;w=3600, "hourly";q=5;w=3600');
    const remaining = responses.map((r) =>
      /"burst";r=(\d+);t=\d+, "hourly";r=(\d+);t=\d+/.exec(r.headers['ratelimit'])!.slice(1).join('/'),
    );
    expect(remaining).toEqual(['3/4', '2/3', '1/2', '0/1', '0/1']);
    // One unit comes back 15 minutes after the first call (899 if the calls took over a second).
    expect(responses[4].body).toEqual({
      statusCode: 429,
      message: 'Too Many Requests',
      error: 'Too Many Requests',
      retryAfter: expect.any(Number),
    });
    expect(responses[4].body.retryAfter).toBeGreaterThanOrEqual(890);
    expect(responses[4].body.retryAfter).toBeLessThanOrEqual(900);
    const client = await redis.client();
    const keys = (await client.keys(`${prefix}:*`)).map((key) => key.replace(/^.*\}:/, '')).sort();
    // `instances`: the runtime-overrides poll's heartbeat (`<prefix>:{overrides}:instances`), and `denies:carry-over`,
    // the marker of the carry-over of 1.0 deny keys (none here: done), beside the two limits' keys.
    expect(keys).toEqual(['denies:carry-over', 'instances', 'r=DefaultsController.more:burst:t', 'r=DefaultsController.more:hourly:fw']);
  });
});
