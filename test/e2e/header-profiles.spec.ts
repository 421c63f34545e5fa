/**
 * The `RateLimit` field under each header profile, read with an RFC 9651 parser from npm, on Express and
 * Fastify, memory and Redis. draft-11 (the default): `t` is the effective window of `r` (§4.1.2) and a 429
 * lists no `t` beyond its `Retry-After` (§6); draft-10: `t` is when more quota comes.
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, type RateLimitModuleOptions } from '../../lib';
import { fieldMembers, secondsOver, timed } from '../support/rate-limit-fields';
import { bootApp, clearOfMinuteEnd, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

const HOUR = 3_600_000;
const DAY = 86_400_000;

@Controller()
class ProfilesController {
  @Get('bucket')
  @RateLimit({ algorithm: 'token-bucket', limit: 1, window: '1s', burst: 10, name: 'tb' })
  bucket() {
    return 'bucket';
  }

  @Get('hourly')
  @RateLimit({ algorithm: 'fixed-window', limit: 100, window: '1h', name: 'hourly' })
  hourly() {
    return 'hourly';
  }

  @Get('two')
  @RateLimit([
    { algorithm: 'fixed-window', limit: 3, window: '10s', name: 'burst' },
    { algorithm: 'fixed-window', limit: 1_000, window: '1d', name: 'daily' },
  ])
  two() {
    return 'two';
  }

  @Get('slots')
  @RateLimit({ algorithm: 'concurrency', limit: 2, window: '30s', name: 'slots' })
  slots() {
    return 'slots';
  }
}

/** Waits out the end of the current aligned 10 s window when it is less than 2 s away. */
async function clearOfTenSecondEnd(): Promise<void> {
  const left = 10_000 - (Date.now() % 10_000);
  if (left < 2_000) await sleep(left + 20);
}

describe.each(MATRIX)('header profiles on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  const boot = async (options: RateLimitModuleOptions = {}) => {
    app = await bootApp({ adapter, imports: [await rateLimitModule(store, redis, options)], controllers: [ProfilesController] });
  };
  const get = (path: string) => request(app.getHttpServer()).get(path);
  afterEach(() => app.close());
  afterAll(() => redis.stop());

  describe('draft-11, the default', () => {
    it('token bucket 1/s burst 10, three requests: r=7;t=3 (full again in 3 s)', async () => {
      await boot();
      await get('/bucket');
      await get('/bucket');
      const res = await get('/bucket');
      expect(res.status).toBe(200);
      expect(fieldMembers(res.headers['ratelimit-policy'])).toEqual([{ name: 'tb', q: 10, w: 10 }]);
      expect(fieldMembers(res.headers['ratelimit'])).toEqual([{ name: 'tb', r: 7, t: 3 }]);
    });

    it('fixed window of an hour: t is the seconds to the hour’s end', async () => {
      await clearOfMinuteEnd(); // an hour's end is a minute's end
      await boot();
      const { res, before, after } = await timed(() => get('/hourly'));
      expect(res.status).toBe(200);
      const [member] = fieldMembers(res.headers['ratelimit'])!;
      expect(member).toEqual({ name: 'hourly', r: 99, t: expect.any(Number) });
      expect(secondsOver(before, after, (now) => HOUR - (now % HOUR))).toContain(member.t);
    });

    it('two policies: the 429 lists only the violated one, whose t is its Retry-After, and names it in violated-policies', async () => {
      await clearOfMinuteEnd(); // a day's end is a minute's end
      await clearOfTenSecondEnd();
      await boot({ errorFormat: 'problem+json' });
      const { res: first, before, after } = await timed(() => get('/two'));
      expect(fieldMembers(first.headers['ratelimit-policy'])).toEqual([
        { name: 'burst', q: 3, w: 10 },
        { name: 'daily', q: 1_000, w: 86_400 },
      ]);
      const [burst, daily] = fieldMembers(first.headers['ratelimit'])!;
      expect(burst).toEqual({ name: 'burst', r: 2, t: expect.any(Number) });
      expect(secondsOver(before, after, (now) => 10_000 - (now % 10_000))).toContain(burst.t);
      expect(daily).toEqual({ name: 'daily', r: 999, t: expect.any(Number) });
      expect(secondsOver(before, after, (now) => DAY - (now % DAY))).toContain(daily.t);

      await get('/two');
      await get('/two');
      const rejected = await get('/two');
      expect(rejected.status).toBe(429);
      const retryAfter = Number(rejected.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(10);
      // Every t listed is at most the Retry-After: the daily policy, which had room, is left out.
      expect(fieldMembers(rejected.headers['ratelimit'])).toEqual([{ name: 'burst', r: 0, t: retryAfter }]);
      expect(rejected.body).toMatchObject({ status: 429, 'violated-policies': ['burst'] });
    });

    it('concurrency: r alone, no t', async () => {
      await boot();
      const res = await get('/slots');
      expect(res.status).toBe(200);
      expect(fieldMembers(res.headers['ratelimit'])).toEqual([{ name: 'slots', r: 1 }]);
    });
  });

  describe("draft-10, on request (headerProfile: 'draft-10')", () => {
    it('token bucket 1/s burst 10, three requests: r=7;t=1 (the next token)', async () => {
      await boot({ headerProfile: 'draft-10' });
      await get('/bucket');
      await get('/bucket');
      const res = await get('/bucket');
      expect(res.headers['ratelimit']).toBe('"tb";r=7;t=1');
    });

    it('two policies: the 429 lists every policy, the daily one beyond Retry-After', async () => {
      await clearOfMinuteEnd();
      await clearOfTenSecondEnd();
      await boot({ headerProfile: 'draft-10' });
      for (let i = 0; i < 3; i++) await get('/two');
      const { res: rejected, before, after } = await timed(() => get('/two'));
      expect(rejected.status).toBe(429);
      const retryAfter = Number(rejected.headers['retry-after']);
      const [burst, daily] = fieldMembers(rejected.headers['ratelimit'])!;
      expect(burst).toEqual({ name: 'burst', r: 0, t: retryAfter });
      expect(daily).toEqual({ name: 'daily', r: 997, t: expect.any(Number) });
      expect(secondsOver(before, after, (now) => DAY - (now % DAY))).toContain(daily.t);
    });

    it('concurrency: t is the soonest lease expiry', async () => {
      await boot({ headerProfile: 'draft-10' });
      const res = await get('/slots');
      expect(fieldMembers(res.headers['ratelimit'])).toEqual([{ name: 'slots', r: 1, t: 30 }]);
    });
  });
});
