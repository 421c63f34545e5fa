import { Controller, Get, Injectable, UseGuards, type CanActivate, type ExecutionContext, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, RateLimitGuard } from '../../lib';
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
});
