import {
  Controller,
  Get,
  Injectable,
  Logger,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
} from '@nestjs/common';
import request from 'supertest';
import { RateLimit, RateLimitConfigError, RateLimitGuard, RateLimiterService, type RateLimitPolicy } from '../../lib';
import { bootApp, MATRIX, rateLimitModule, SharedRedis } from './harness';

const ONE = { algorithm: 'fixed-window', limit: 1, window: '1h' } as const;

/** Stands in for an auth guard: `x-user` becomes `req.user.id` (on the Express or the Fastify request). */
@Injectable()
class FakeAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, string>; user?: unknown }>();
    if (req.headers['x-user']) req.user = { id: req.headers['x-user'] };
    return true;
  }
}

const apiKey = async (context: ExecutionContext) =>
  context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-api-key'];

@Controller()
@UseGuards(FakeAuthGuard, RateLimitGuard)
class TrackedController {
  @Get('by-ip')
  @RateLimit(ONE)
  byIp() {
    return 'ip';
  }

  @Get('by-key')
  @RateLimit({ ...ONE, by: apiKey })
  byKey() {
    return 'key';
  }

  @Get('by-user')
  @RateLimit({ ...ONE, by: 'user' })
  byUser() {
    return 'user';
  }

  @Get('ns-ip')
  @RateLimit({ ...ONE, scope: 'ns' })
  nsIp() {
    return 'ns-ip';
  }

  @Get('ns-user')
  @RateLimit({ ...ONE, scope: 'ns', by: 'user' })
  nsUser() {
    return 'ns-user';
  }
}

const TWO = { algorithm: 'fixed-window', limit: 2, window: '1h' } as const;
/** The policy of the `acct` scope, as a service call writes it: the same name, algorithm, limit, window and scope. */
const ACCOUNT: RateLimitPolicy = { ...TWO, scope: 'acct' };

/**
 * The README's pattern: `by` returns the `x-api-key` header, and the client IP without one. Whatever the
 * header says, its value counts as `by:<value>`, never as a built-in `ip:` / `user:` tracker.
 */
@Controller('ns')
@UseGuards(FakeAuthGuard, RateLimitGuard)
class NamespacedController {
  @Get('key')
  @RateLimit({ ...TWO, by: apiKey })
  key() {
    return 'key';
  }

  @Get('ip')
  @RateLimit(ACCOUNT)
  ip() {
    return 'ip';
  }

  @Get('user')
  @RateLimit({ ...ACCOUNT, by: 'user' })
  user() {
    return 'user';
  }

  @Get('account')
  @RateLimit({ ...ACCOUNT, by: apiKey })
  account() {
    return 'account';
  }

  @Get('shadow')
  @RateLimit({ ...TWO, limit: 1, by: apiKey, mode: 'shadow', name: 'trial' })
  shadow() {
    return 'shadow';
  }
}

describe.each(MATRIX)('trackers on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  afterAll(() => redis.stop());

  describe('behind no trusted proxy', () => {
    let app: INestApplication;
    beforeAll(async () => {
      const module = await rateLimitModule(store, redis, { registerGuard: false });
      app = await bootApp({ adapter, imports: [module], controllers: [TrackedController] });
    });
    afterAll(() => app.close());
    const get = (path: string, headers: Record<string, string> = {}) => request(app.getHttpServer()).get(path).set(headers);

    it('never reads X-Forwarded-For: spoofed addresses share the real peer address quota', async () => {
      expect((await get('/by-ip', { 'x-forwarded-for': '203.0.113.1' })).status).toBe(200);
      expect((await get('/by-ip', { 'x-forwarded-for': '203.0.113.2' })).status).toBe(429);
      expect((await get('/by-ip')).status).toBe(429);
    });

    it('keys a function tracker by its value, falling back to the IP when it returns nothing', async () => {
      expect((await get('/by-key', { 'x-api-key': 'alpha' })).status).toBe(200);
      expect((await get('/by-key', { 'x-api-key': 'alpha' })).status).toBe(429);
      expect((await get('/by-key', { 'x-api-key': 'beta' })).status).toBe(200);
      expect((await get('/by-key')).status).toBe(200);
      expect((await get('/by-key')).status).toBe(429);
    });

    it("keys 'user' by the user id, and anonymous requests by IP", async () => {
      expect((await get('/by-user', { 'x-user': 'ann' })).status).toBe(200);
      expect((await get('/by-user', { 'x-user': 'ann' })).status).toBe(429);
      expect((await get('/by-user', { 'x-user': 'bob' })).status).toBe(200);
      expect((await get('/by-user')).status).toBe(200);
      expect((await get('/by-user')).status).toBe(429);
    });

    it('never lets a user id collide with an IP address in a shared scope', async () => {
      expect((await get('/ns-ip')).status).toBe(200);
      expect((await get('/ns-ip')).status).toBe(429);
      // A user whose id is the client's address still has a quota of its own.
      expect((await get('/ns-user', { 'x-user': '127.0.0.1' })).status).toBe(200);
      expect((await get('/ns-user', { 'x-user': '127.0.0.1' })).status).toBe(429);
    });
  });

  describe.each([
    [64, ['2001:db8:0:1::1', '2001:db8:0:1::ffff', '2001:db8:0:2::1'], [200, 429, 200]],
    [128, ['2001:db8:0:1::1', '2001:db8:0:1::ffff', '2001:db8:0:1::1'], [200, 200, 429]],
  ] as const)('behind a trusted proxy, ipv6Subnet %i', (ipv6Subnet, addresses, statuses) => {
    let app: INestApplication;
    beforeAll(async () => {
      const module = await rateLimitModule(store, redis, { registerGuard: false, ipv6Subnet });
      app = await bootApp({ adapter, imports: [module], controllers: [TrackedController], trustProxy: true });
    });
    afterAll(() => app.close());
    const get = (path: string, xff: string) => request(app.getHttpServer()).get(path).set('x-forwarded-for', xff);

    it('uses the forwarded client address the framework computed', async () => {
      expect((await get('/by-ip', '203.0.113.1')).status).toBe(200);
      expect((await get('/by-ip', '203.0.113.2')).status).toBe(200);
      expect((await get('/by-ip', '203.0.113.1')).status).toBe(429);
    });

    it('groups IPv6 clients by the configured prefix length', async () => {
      const got = [];
      for (const address of addresses) got.push((await get('/by-ip', address)).status);
      expect(got).toEqual(statuses);
    });
  });

  describe("namespaces: a by function's value V is the tracker by:V", () => {
    let app: INestApplication;
    let limiter: RateLimiterService;
    beforeEach(async () => {
      const module = await rateLimitModule(store, redis, { registerGuard: false });
      app = await bootApp({ adapter, imports: [module], controllers: [NamespacedController] });
      limiter = app.get(RateLimiterService);
    });
    afterEach(() => app.close());
    const get = (path: string, headers: Record<string, string> = {}) => request(app.getHttpServer()).get(path).set(headers);
    const statuses = async (n: number, path: string, headers: Record<string, string> = {}) => {
      const got = [];
      for (let i = 0; i < n; i++) got.push((await get(path, headers)).status);
      return got;
    };

    it("a client sending x-api-key 'ip:127.0.0.1' spends its own quota, never the IP client's", async () => {
      expect(await statuses(3, '/ns/key', { 'x-api-key': 'ip:127.0.0.1' })).toEqual([200, 200, 429]);
      // The client at 127.0.0.1 (no key: by falls back to its address) still has its full limit.
      expect(await statuses(3, '/ns/key')).toEqual([200, 200, 429]);
      // Nor can a key spell a user, or a scoped counter of the address or the user.
      expect(await statuses(2, '/ns/account', { 'x-api-key': 'ip:127.0.0.1' })).toEqual([200, 200]);
      expect(await statuses(2, '/ns/account', { 'x-api-key': 'user:ann' })).toEqual([200, 200]);
      expect(await statuses(3, '/ns/ip')).toEqual([200, 200, 429]);
      expect(await statuses(3, '/ns/user', { 'x-user': 'ann' })).toEqual([200, 200, 429]);
      expect((await limiter.peek(ACCOUNT, 'by:ip:127.0.0.1')).remaining).toBe(0);
      expect((await limiter.peek(ACCOUNT, 'by:user:ann')).remaining).toBe(0);
    });

    it("deny('127.0.0.1') is refused, saying what to write; deny('ip:127.0.0.1') denies the IP client only", async () => {
      const refused = await limiter.deny('127.0.0.1', '10m').catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(RateLimitConfigError);
      expect((refused as Error).message).toBe(
        `key: "127.0.0.1" is a bare IP address, which names no tracker: write 'ip:127.0.0.1' for the client at that address, or 'by:127.0.0.1' for a value your by function returns.`,
      );
      expect((await get('/ns/ip')).status).toBe(200);

      await limiter.deny('ip:127.0.0.1', '10m');
      const denied = await get('/ns/ip');
      expect([denied.status, denied.headers['retry-after']]).toEqual([429, '600']);
      expect((await get('/ns/key')).status).toBe(429);
      // A key that spells the address, or is the address, is another tracker.
      expect((await get('/ns/key', { 'x-api-key': 'ip:127.0.0.1' })).status).toBe(200);
      expect((await get('/ns/key', { 'x-api-key': '127.0.0.1' })).status).toBe(200);

      await limiter.deny('by:127.0.0.1', '10m');
      expect((await get('/ns/key', { 'x-api-key': '127.0.0.1' })).status).toBe(429);
      expect((await get('/ns/key', { 'x-api-key': 'ip:127.0.0.1' })).status).toBe(200);
      expect(await limiter.denied('ip:127.0.0.1')).toMatchObject({ until: expect.any(Date) });
      expect(await limiter.denied('by:ip:127.0.0.1')).toBeUndefined();
    });

    it("service consume(scopedPolicy, 'acme') and a route whose by returns 'acme' share one counter", async () => {
      expect(await limiter.consume(ACCOUNT, 'acme')).toMatchObject({ allowed: true, remaining: 1 });
      expect(await statuses(2, '/ns/account', { 'x-api-key': 'acme' })).toEqual([200, 429]);
      expect(await limiter.peek(ACCOUNT, 'acme')).toMatchObject({ allowed: false, remaining: 0 });
      // 'by:acme' names the same tracker explicitly; 'user:acme' and the IP client are others.
      expect(await limiter.peek(ACCOUNT, 'by:acme')).toMatchObject({ allowed: false, remaining: 0 });
      expect((await limiter.peek(ACCOUNT, 'user:acme')).remaining).toBe(2);
      expect((await limiter.peek(ACCOUNT, 'ip:127.0.0.1')).remaining).toBe(2);
      await limiter.reset(ACCOUNT, 'by:acme');
      expect(await statuses(3, '/ns/account', { 'x-api-key': 'acme' })).toEqual([200, 200, 429]);
    });

    it('by: keys reach by values exactly, including values that start with by: or are addresses', async () => {
      // A route value 'by:acme' is the tracker by:by:acme, not the one of 'acme'.
      expect(await statuses(2, '/ns/account', { 'x-api-key': 'by:acme' })).toEqual([200, 200]);
      expect((await limiter.peek(ACCOUNT, 'acme')).remaining).toBe(2);
      expect((await limiter.peek(ACCOUNT, 'by:acme')).remaining).toBe(2);
      expect((await limiter.peek(ACCOUNT, 'by:by:acme')).remaining).toBe(0);
      // A value that is an address is reached through by:, and is not the client at that address.
      expect((await limiter.consume(ACCOUNT, 'by:203.0.113.7')).remaining).toBe(1);
      expect(await statuses(2, '/ns/account', { 'x-api-key': '203.0.113.7' })).toEqual([200, 429]);
      expect((await limiter.peek(ACCOUNT, 'ip:203.0.113.7')).remaining).toBe(2);
      // The service's ip: and user: keys reach the built-in trackers' scoped counters.
      expect(await statuses(1, '/ns/ip')).toEqual([200]);
      expect((await limiter.consume(ACCOUNT, 'ip:::ffff:127.0.0.1')).remaining).toBe(0);
      expect((await get('/ns/ip')).status).toBe(429);
      await limiter.block(ACCOUNT, 'user:ann', '1m');
      expect((await get('/ns/user', { 'x-user': 'ann' })).status).toBe(429);
      expect((await get('/ns/account', { 'x-api-key': 'user:ann' })).status).toBe(200);
    });

    it('logs a shadow rejection with the by: tracker', async () => {
      const debug = jest.spyOn(Logger.prototype, 'debug').mockImplementation(() => undefined);
      try {
        expect(await statuses(2, '/ns/shadow', { 'x-api-key': 'ip:127.0.0.1' })).toEqual([200, 200]);
        const shadowLogs = debug.mock.calls.map(([message]) => String(message)).filter((message) => message.startsWith('shadow:'));
        expect(shadowLogs).toHaveLength(1);
        expect(shadowLogs[0]).toMatch(
          /^shadow: policy 'trial' on NamespacedController\.shadow would have rejected by:ip:127\.0\.0\.1 \(retry after \d+ ms\)$/,
        );
      } finally {
        debug.mockRestore();
      }
    });
  });
});
