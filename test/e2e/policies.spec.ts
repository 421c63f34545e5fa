import { Controller, Get, Logger, Query, UnauthorizedException, type ExecutionContext, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit } from '../../lib';
import { fieldMembers, secondsOver, timed } from '../support/rate-limit-fields';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

const header = (context: ExecutionContext, name: string) =>
  context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers[name];
const PLANS: Record<string, number> = { gold: 3, free: 1 };
// sliding-log: no aligned window boundary, so a request that happens to straddle one cannot reset a counter mid-test.
const A = { name: 'a', algorithm: 'sliding-log', limit: 3, window: '1m', scope: 'multi' } as const;

@Controller()
class PoliciesController {
  @Get('multi')
  @RateLimit([A, { name: 'b', algorithm: 'sliding-log', limit: 1, window: '1m' }])
  multi() {
    return 'multi';
  }

  @Get('multi-trackers')
  @RateLimit([
    { ...A, scope: 'multi2' },
    { name: 'b', algorithm: 'sliding-log', limit: 1, window: '1m', by: (c) => header(c, 'x-api-key') ?? '' },
  ])
  multiTrackers() {
    return 'multi-trackers';
  }

  @Get('multi-throws')
  @RateLimit([
    { ...A, scope: 'multi3' },
    {
      name: 'b',
      algorithm: 'sliding-log',
      limit: 1,
      window: '1m',
      by: (c) => {
        if (header(c, 'x-boom')) throw new Error('tracker failed');
        return 'fine';
      },
    },
  ])
  multiThrows() {
    return 'multi-throws';
  }

  @Get('a3-only')
  @RateLimit({ ...A, scope: 'multi3' })
  a3Only() {
    return 'a3';
  }

  @Get('a-only')
  @RateLimit(A)
  aOnly() {
    return 'a';
  }

  @Get('a2-only')
  @RateLimit({ ...A, scope: 'multi2' })
  a2Only() {
    return 'a2';
  }

  @Get('tiered')
  @RateLimit({
    name: 'tier',
    algorithm: 'sliding-log',
    by: (c) => header(c, 'x-api-key') ?? '',
    limit: (c) => PLANS[header(c, 'x-api-key') ?? ''] ?? 1,
    window: async (c) => (header(c, 'x-api-key') === 'gold' ? '1m' : '2m'),
    cost: (c) => Number(header(c, 'x-cost') ?? 1),
  })
  tiered() {
    return 'tiered';
  }

  @Get('login')
  @RateLimit({ algorithm: 'fixed-window', limit: 2, window: '1h', countOnly: 'failed' })
  login(@Query('password') password: string) {
    if (password !== 'right') throw new UnauthorizedException();
    return 'welcome';
  }

  @Get('only-successes')
  @RateLimit({ algorithm: 'fixed-window', limit: 2, window: '1h', countOnly: 'succeeded' })
  onlySuccesses(@Query('fail') fail?: string) {
    if (fail) throw new UnauthorizedException();
    return 'ok';
  }

  @Get('locked')
  @RateLimit({ algorithm: 'sliding-log', limit: 1, window: 200, blockFor: 600 })
  locked() {
    return 'locked';
  }

  @Get('shadow')
  @RateLimit([
    { name: 'enforced', algorithm: 'sliding-log', limit: 3, window: '1m' },
    { name: 'trial', algorithm: 'sliding-log', limit: 1, window: '1m', mode: 'shadow' },
  ])
  shadow() {
    return 'shadow';
  }
}

describe.each(MATRIX)('policies on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  beforeAll(async () => {
    app = await bootApp({ adapter, imports: [await rateLimitModule(store, redis)], controllers: [PoliciesController] });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });
  const get = (path: string, headers: Record<string, string> = {}) => request(app.getHttpServer()).get(path).set(headers);
  /** The `r` of the route's one `RateLimit` member. */
  const remaining = (res: request.Response) => {
    const members = fieldMembers(res.headers['ratelimit'])!;
    expect(members).toHaveLength(1);
    return members[0].r;
  };

  describe('several policies on one route', () => {
    it('rejects when one policy is exhausted and leaves the others untouched', async () => {
      const admitted = await timed(() => get('/multi'));
      const first = admitted.res;
      expect(first.status).toBe(200);
      expect(first.headers['ratelimit-policy']).toBe('"a";q=3;w=60, "b";q=1;w=60');
      for (let i = 0; i < 3; i++) {
        const { res: rejected, before, after } = await timed(() => get('/multi'));
        expect(rejected.status).toBe(429);
        // Both come back when the admitted request's entry ages out (charged in one script call).
        const aging = secondsOver(Math.max(before - admitted.after, 0), after - admitted.before, (ms) => 60_000 - ms);
        const retryAfter = Number(rejected.headers['retry-after']);
        // Only the violated policy is listed (draft-11): 'a', which had room, is left out of the 429.
        expect(fieldMembers(rejected.headers['ratelimit'])).toEqual([{ name: 'b', r: 0, t: retryAfter }]);
        expect(aging).toContain(retryAfter);
      }
      // 'a' is shared with /a-only through its scope: only the one admitted request was charged.
      expect(remaining(await get('/a-only'))).toBe(1);
      expect(remaining(await get('/a-only'))).toBe(0);
      expect((await get('/a-only')).status).toBe(429);
    });

    it('refunds the other trackers when a policy on a different tracker rejects', async () => {
      expect((await get('/multi-trackers', { 'x-api-key': 'k1' })).status).toBe(200);
      expect((await get('/multi-trackers', { 'x-api-key': 'k1' })).status).toBe(429);
      expect((await get('/multi-trackers', { 'x-api-key': 'k1' })).status).toBe(429);
      expect(remaining(await get('/a2-only'))).toBe(1);
    });

    it('charges nothing when a tracker function throws', async () => {
      expect((await get('/multi-throws', { 'x-boom': '1' })).status).toBe(500);
      expect((await get('/multi-throws', { 'x-boom': '1' })).status).toBe(500);
      expect(remaining(await get('/a3-only'))).toBe(2);
    });
  });

  it('computes limit, window and cost per request (plan tiers)', async () => {
    const gold = await get('/tiered', { 'x-api-key': 'gold' });
    expect(gold.headers['ratelimit-policy']).toBe('"tier";q=3;w=60');
    expect(gold.headers['ratelimit']).toBe('"tier";r=2;t=60');
    const goldBulk = await get('/tiered', { 'x-api-key': 'gold', 'x-cost': '2' });
    expect(goldBulk.status).toBe(200);
    expect(goldBulk.headers['ratelimit']).toBe('"tier";r=0;t=60');
    expect((await get('/tiered', { 'x-api-key': 'gold' })).status).toBe(429);

    const free = await get('/tiered', { 'x-api-key': 'free' });
    expect(free.headers['ratelimit-policy']).toBe('"tier";q=1;w=120');
    expect(free.headers['ratelimit']).toBe('"tier";r=0;t=120');
    const freeAgain = await get('/tiered', { 'x-api-key': 'free' });
    expect(freeAgain.status).toBe(429);
    expect(freeAgain.headers['retry-after']).toBe('120');
  });

  describe("countOnly: 'failed'", () => {
    it('never exhausts on successes', async () => {
      for (let i = 0; i < 6; i++) expect((await get('/login?password=right')).status).toBe(200);
    });

    it('exhausts on failures', async () => {
      expect((await get('/login?password=wrong')).status).toBe(401);
      expect((await get('/login?password=wrong')).status).toBe(401);
      expect((await get('/login?password=wrong')).status).toBe(429);
      expect((await get('/login?password=right')).status).toBe(429);
    });
  });

  it("countOnly: 'succeeded' never exhausts on failures and exhausts on successes", async () => {
    for (let i = 0; i < 4; i++) expect((await get('/only-successes?fail=1')).status).toBe(401);
    expect((await get('/only-successes')).status).toBe(200);
    expect((await get('/only-successes')).status).toBe(200);
    expect((await get('/only-successes')).status).toBe(429);
  });

  it('keeps a tracker locked out for blockFor, past the window, and lets it back in on time', async () => {
    expect((await get('/locked')).status).toBe(200);
    const rejectedAt = Date.now();
    const rejected = await get('/locked');
    expect(rejected.status).toBe(429);
    expect(rejected.headers['retry-after']).toBe('1');
    expect(rejected.body.retryAfter).toBe(1);
    await sleep(350 - (Date.now() - rejectedAt)); // the 200 ms window is long over, the 600 ms block is not
    expect((await get('/locked')).status).toBe(429);
    await sleep(700 - (Date.now() - rejectedAt));
    expect((await get('/locked')).status).toBe(200);
  });

  it('never rejects on a shadow policy, leaves it out of the headers, and logs at debug', async () => {
    const debug = jest.spyOn(Logger.prototype, 'debug').mockImplementation(() => undefined);
    try {
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await get('/shadow')).status);
      expect(statuses).toEqual([200, 200, 200]);
      const fourth = await get('/shadow');
      expect(fourth.status).toBe(429);
      expect(fourth.headers['retry-after']).toBe('60');
      expect(fourth.headers['ratelimit']).toBe('"enforced";r=0;t=60');
      const shadowLogs = debug.mock.calls.filter(([message]) => String(message).startsWith('shadow:'));
      expect(shadowLogs).toHaveLength(3);
      expect(shadowLogs[0][0]).toMatch(
        /^shadow: policy 'trial' on PoliciesController\.shadow would have rejected ip:127\.0\.0\.1 \(retry after \d+ ms\)$/,
      );
    } finally {
      debug.mockRestore();
    }
  });
});
