import { Controller, Get, type INestApplication } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import request from 'supertest';
import { RateLimit, SkipRateLimit } from '../../lib';
import { bootApp, MATRIX, rateLimitModule, SharedRedis } from './harness';

/** token-bucket 3 per minute: each token takes 20 s to come back, so every header value below is exact. */
const BUCKET = { algorithm: 'token-bucket', limit: 3, window: '1m' } as const;

@Controller('cats')
@RateLimit({ ...BUCKET, name: 'cats' })
class CatsController {
  @Get()
  list() {
    return ['tom'];
  }

  @Get('other')
  other() {
    return 'other';
  }

  @Get('own')
  @RateLimit({ ...BUCKET, limit: 1, name: 'own' })
  own() {
    return 'own';
  }

  @Get('free')
  @SkipRateLimit()
  free() {
    return 'free';
  }

  @Get('shared-a')
  @RateLimit({ ...BUCKET, limit: 2, scope: 'shared' })
  sharedA() {
    return 'a';
  }

  @Get('shared-b')
  @RateLimit({ ...BUCKET, limit: 2, scope: 'shared' })
  sharedB() {
    return 'b';
  }

  @Get('positional')
  @RateLimit('sliding-log', 2, '1m', { name: 'pos' })
  positional() {
    return 'pos';
  }

  @Get('expensive')
  // A cost function: a fixed cost above the capacity fails at bootstrap, one known only per request is rejected.
  @RateLimit({ ...BUCKET, cost: () => 5, name: 'big' })
  expensive() {
    return 'never';
  }
}

@Controller('dogs')
@SkipRateLimit()
class DogsController {
  @Get()
  list() {
    return ['rex'];
  }

  @Get('limited')
  @RateLimit({ ...BUCKET, limit: 1, name: 'dogs' })
  limited() {
    return 'limited';
  }
}

@Controller('plain')
class PlainController {
  @Get()
  get() {
    return 'plain';
  }
}

describe.each(MATRIX)('limits on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  afterAll(() => redis.stop());

  describe('with a defaultPolicy and IETF headers', () => {
    let app: INestApplication;
    beforeAll(async () => {
      // draft-10's t (until more quota comes): these are the numbers the draft-10 profile must keep.
      const module = await rateLimitModule(store, redis, {
        defaultPolicy: { algorithm: 'token-bucket', limit: 2, window: '10s', name: 'dflt' },
        headerProfile: 'draft-10',
      });
      app = await bootApp({ adapter, imports: [module], controllers: [CatsController, DogsController, PlainController] });
    });
    afterAll(() => app.close());
    const get = (path: string) => request(app.getHttpServer()).get(path);

    it('counts down with exact IETF headers, then answers 429 with Retry-After and the JSON body', async () => {
      const expected = [
        ['"cats";r=2;t=20', 200],
        ['"cats";r=1;t=20', 200],
        ['"cats";r=0;t=20', 200],
      ] as const;
      for (const [quota, status] of expected) {
        const res = await get('/cats');
        expect(res.status).toBe(status);
        expect(res.headers['ratelimit-policy']).toBe('"cats";q=3;w=60');
        expect(res.headers['ratelimit']).toBe(quota);
        expect(res.headers['retry-after']).toBeUndefined();
        expect(res.headers['x-ratelimit-limit']).toBeUndefined();
      }
      const rejected = await get('/cats');
      expect(rejected.status).toBe(429);
      expect(rejected.headers['retry-after']).toBe('20');
      expect(rejected.headers['ratelimit']).toBe('"cats";r=0;t=20');
      expect(rejected.body).toEqual({ statusCode: 429, message: 'Too Many Requests', error: 'Too Many Requests', retryAfter: 20 });
    });

    it('keeps a counter per route: a class policy on another handler starts full', async () => {
      const res = await get('/cats/other');
      expect(res.status).toBe(200);
      expect(res.headers['ratelimit']).toBe('"cats";r=2;t=20');
    });

    it('lets handler metadata override class metadata', async () => {
      const first = await get('/cats/own');
      expect(first.status).toBe(200);
      expect(first.headers['ratelimit-policy']).toBe('"own";q=1;w=60');
      expect(first.headers['ratelimit']).toBe('"own";r=0;t=60');
      expect((await get('/cats/own')).status).toBe(429);
    });

    it('skips a handler marked @SkipRateLimit inside a limited controller', async () => {
      for (let i = 0; i < 5; i++) {
        const res = await get('/cats/free');
        expect(res.status).toBe(200);
        expect(res.headers['ratelimit']).toBeUndefined();
      }
    });

    it('skips a @SkipRateLimit controller, defaultPolicy included, except a handler with its own @RateLimit', async () => {
      for (let i = 0; i < 4; i++) expect((await get('/dogs')).status).toBe(200);
      expect((await get('/dogs')).headers['ratelimit']).toBeUndefined();
      expect((await get('/dogs/limited')).status).toBe(200);
      expect((await get('/dogs/limited')).status).toBe(429);
    });

    it('applies defaultPolicy to routes without @RateLimit', async () => {
      const first = await get('/plain');
      expect(first.headers['ratelimit-policy']).toBe('"dflt";q=2;w=10');
      expect(first.headers['ratelimit']).toBe('"dflt";r=1;t=5');
      expect((await get('/plain')).status).toBe(200);
      const third = await get('/plain');
      expect(third.status).toBe(429);
      expect(third.headers['retry-after']).toBe('5');
    });

    it('shares one quota between routes with the same scope', async () => {
      expect((await get('/cats/shared-a')).headers['ratelimit']).toBe('"default";r=1;t=30');
      expect((await get('/cats/shared-b')).headers['ratelimit']).toBe('"default";r=0;t=30');
      expect((await get('/cats/shared-a')).status).toBe(429);
      expect((await get('/cats/shared-b')).status).toBe(429);
    });

    it('accepts the positional form @RateLimit(algorithm, limit, window, extra)', async () => {
      const first = await get('/cats/positional');
      expect(first.headers['ratelimit-policy']).toBe('"pos";q=2;w=60');
      expect(first.headers['ratelimit']).toBe('"pos";r=1;t=60');
      expect((await get('/cats/positional')).headers['ratelimit']).toBe('"pos";r=0;t=60');
      const third = await get('/cats/positional');
      expect(third.status).toBe(429);
      expect(third.headers['retry-after']).toBe('60');
    });

    it('reads no metadata on the request path: plans are built once, at bootstrap', async () => {
      const get = jest.spyOn(Reflector.prototype, 'get');
      const getMetadata = jest.spyOn(Reflect, 'getMetadata');
      try {
        for (const path of ['/cats/other', '/cats/free', '/plain', '/dogs']) await request(app.getHttpServer()).get(path);
        expect(get).not.toHaveBeenCalled();
        expect(getMetadata.mock.calls.filter(([key]) => String(key).startsWith('nestjs-redis-ratelimit'))).toEqual([]);
      } finally {
        get.mockRestore();
        getMetadata.mockRestore();
      }
    });

    it('omits Retry-After and says why when the cost can never fit', async () => {
      const res = await get('/cats/expensive');
      expect(res.status).toBe(429);
      expect(res.headers['retry-after']).toBeUndefined();
      expect(res.body).toEqual({
        statusCode: 429,
        message: "Too Many Requests: this request costs more than policy 'big' can ever allow (capacity 3), so retrying will not help.",
        error: 'Too Many Requests',
        retryAfter: null,
      });
    });
  });

  describe.each([
    ['legacy', { legacy: ['3', '2', '20'], ietf: false }],
    ['both', { legacy: ['3', '2', '20'], ietf: true }],
    ['none', { legacy: undefined, ietf: false }],
  ] as const)("with headers: '%s'", (headers, expected) => {
    let app: INestApplication;
    beforeAll(async () => {
      const module = await rateLimitModule(store, redis, { headers, errorMessage: 'Slow down' });
      app = await bootApp({ adapter, imports: [module], controllers: [CatsController] });
    });
    afterAll(() => app.close());

    it('sends exactly the requested header set, and Retry-After on every 429', async () => {
      const res = await request(app.getHttpServer()).get('/cats');
      const legacy = [res.headers['x-ratelimit-limit'], res.headers['x-ratelimit-remaining'], res.headers['x-ratelimit-reset']];
      expect(expected.legacy ? legacy : legacy.filter(Boolean)).toEqual(expected.legacy ?? []);
      expect(res.headers['ratelimit']).toBe(expected.ietf ? '"cats";r=2;t=20' : undefined);
      expect(res.headers['ratelimit-policy']).toBe(expected.ietf ? '"cats";q=3;w=60' : undefined);
      await request(app.getHttpServer()).get('/cats/own');
      const rejected = await request(app.getHttpServer()).get('/cats/own');
      expect(rejected.status).toBe(429);
      expect(rejected.headers['retry-after']).toBe('60');
      expect(rejected.body.message).toBe('Slow down');
    });
  });
});
