/**
 * Exempting calls: the module's `skipIf` and `ignoreUserAgents`, a policy's own `skipIf`,
 * `@SkipRateLimit('name')` for some policies only, and `errorMessage` as a function.
 */
import { Controller, Get, type ExecutionContext, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, SkipRateLimit, type RateLimitPolicy } from '../../lib';
import { fieldMembers, secondsOver, timed } from '../support/rate-limit-fields';
import { bootApp, MATRIX, rateLimitModule, SharedRedis } from './harness';

const header = (context: ExecutionContext, name: string) =>
  context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers[name];
// sliding-log: no aligned window boundary, so a counter never resets mid-test.
const BURST: RateLimitPolicy = { name: 'burst', algorithm: 'sliding-log', limit: 1, window: '1m' };
const DAILY: RateLimitPolicy = { name: 'daily', algorithm: 'sliding-log', limit: 3, window: '1m' };

@Controller('both')
@RateLimit([BURST, DAILY])
class BothController {
  @Get('plain')
  plain() {
    return 'plain';
  }

  @Get('no-burst')
  @SkipRateLimit('burst')
  noBurst() {
    return 'no-burst';
  }

  @Get('none')
  @SkipRateLimit('burst', 'daily')
  none() {
    return 'none';
  }

  @Get('all')
  @SkipRateLimit()
  all() {
    return 'all';
  }
}

@Controller('class-skip')
@RateLimit([BURST, DAILY])
@SkipRateLimit('daily')
class ClassSkipController {
  @Get('inherited')
  inherited() {
    return 'inherited';
  }

  @Get('own')
  @RateLimit([
    { ...BURST, limit: 2 },
    { ...DAILY, limit: 1 },
  ])
  own() {
    return 'own';
  }
}

@Controller('policy-skip')
class PolicySkipController {
  @Get('sync')
  @RateLimit([
    { ...BURST, skipIf: (c) => header(c, 'x-vip') === 'yes' },
    { ...DAILY, limit: 2 },
  ])
  sync() {
    return 'sync';
  }

  @Get('async')
  @RateLimit({ ...BURST, skipIf: async (c) => header(c, 'x-vip') === 'yes' })
  async() {
    return 'async';
  }
}

@Controller('module-skip')
@RateLimit(BURST)
class ModuleSkipController {
  @Get()
  get() {
    return 'module-skip';
  }
}

describe.each(MATRIX)('skips on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  const contexts: string[] = [];
  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [
        await rateLimitModule(store, redis, {
          skipIf: async (c) => {
            contexts.push(`${c.getClass().name}.${c.getHandler().name}`);
            return header(c, 'x-internal') === 'yes';
          },
          ignoreUserAgents: [/googlebot/i, /^probe\//g],
          errorMessage: (c, decisions) =>
            `${c.getHandler().name}: ${decisions
              .filter((d) => !d.allowed)
              .map((d) => d.policy)
              .join(',')} exhausted`,
        }),
      ],
      controllers: [BothController, ClassSkipController, PolicySkipController, ModuleSkipController],
    });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });
  const get = (path: string, headers: Record<string, string> = {}) => request(app.getHttpServer()).get(path).set(headers);

  it("@SkipRateLimit('burst') keeps the route's other policies, in its headers too", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await get('/both/no-burst');
      statuses.push(res.status);
      expect(res.headers['ratelimit-policy']).toBe('"daily";q=3;w=60');
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    // The same policies without the skip count apart (per route) and still have 'burst'.
    expect((await get('/both/plain')).headers['ratelimit-policy']).toBe('"burst";q=1;w=60, "daily";q=3;w=60');
    expect((await get('/both/plain')).status).toBe(429);
  });

  it('@SkipRateLimit naming every policy, or none, exempts the route', async () => {
    for (const path of ['/both/none', '/both/all']) {
      for (let i = 0; i < 5; i++) {
        const res = await get(path);
        expect(res.status).toBe(200);
        expect(res.headers['ratelimit-policy']).toBeUndefined();
      }
    }
  });

  it("a class's @SkipRateLimit('daily') applies to its handlers, including their own @RateLimit", async () => {
    const inherited = [await get('/class-skip/inherited'), await get('/class-skip/inherited')];
    expect(inherited.map((r) => r.status)).toEqual([200, 429]);
    expect(inherited[0].headers['ratelimit-policy']).toBe('"burst";q=1;w=60');
    const own = [await get('/class-skip/own'), await get('/class-skip/own'), await get('/class-skip/own')];
    expect(own.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(own[0].headers['ratelimit-policy']).toBe('"burst";q=2;w=60');
  });

  it("a policy's skipIf exempts the call from that policy only", async () => {
    const vip = { 'x-vip': 'yes' };
    const vipCall = await timed(() => get('/policy-skip/sync', vip));
    const first = vipCall.res;
    expect(first.status).toBe(200);
    expect(first.headers['ratelimit-policy']).toBe('"daily";q=2;w=60');
    expect(first.headers['ratelimit']).toBe('"daily";r=1;t=60');
    // A regular call is limited by both; 'burst' was never charged by the VIP call.
    const regularCall = await timed(() => get('/policy-skip/sync'));
    const regular = regularCall.res;
    expect(regular.status).toBe(200);
    // 'burst' comes back when this call's entry ages out; 'daily' when the VIP call's does.
    const sinceVip = secondsOver(Math.max(regularCall.before - vipCall.after, 0), regularCall.after - vipCall.before, (ms) => 60_000 - ms);
    expect(fieldMembers(regular.headers['ratelimit'])).toEqual([
      { name: 'burst', r: 0, t: 60 },
      { name: 'daily', r: 0, t: expect.any(Number) },
    ]);
    expect(sinceVip).toContain(fieldMembers(regular.headers['ratelimit'])![1].t);
    // 'daily' is exhausted: the VIP is rejected by it, with the message naming it.
    const rejected = await get('/policy-skip/sync', vip);
    expect(rejected.status).toBe(429);
    expect(rejected.body).toMatchObject({ statusCode: 429, message: 'sync: daily exhausted' });
  });

  it('an async policy skipIf works the same', async () => {
    expect((await get('/policy-skip/async')).status).toBe(200);
    const rejected = await get('/policy-skip/async');
    expect(rejected.status).toBe(429);
    expect(rejected.body.message).toBe('async: burst exhausted');
    for (let i = 0; i < 3; i++) expect((await get('/policy-skip/async', { 'x-vip': 'yes' })).status).toBe(200);
  });

  it("the module's skipIf exempts the call from every policy, and sees the call's context", async () => {
    contexts.length = 0;
    for (let i = 0; i < 3; i++) {
      const res = await get('/module-skip', { 'x-internal': 'yes' });
      expect(res.status).toBe(200);
      expect(res.headers['ratelimit-policy']).toBeUndefined();
    }
    expect(contexts).toEqual(Array(3).fill('ModuleSkipController.get'));
    expect((await get('/module-skip')).status).toBe(200);
    expect((await get('/module-skip')).status).toBe(429);
    expect((await get('/module-skip', { 'x-internal': 'yes' })).status).toBe(200);
  });

  it('ignoreUserAgents: a matching User-Agent is not limited (a g flag does not make it alternate)', async () => {
    contexts.length = 0;
    for (const agent of ['Mozilla/5.0 (compatible; Googlebot/2.1)', 'probe/1.0', 'probe/1.0', 'probe/1.0']) {
      const res = await get('/module-skip', { 'user-agent': agent });
      expect(res.status).toBe(200);
      expect(res.headers['ratelimit-policy']).toBeUndefined();
    }
    // Ignored before skipIf is asked.
    expect(contexts).toEqual([]);
    expect((await get('/module-skip', { 'user-agent': 'curl/8 probe/1.0' })).status).toBe(429);
  });
});
