/**
 * `by: 'user'` on a call without `req.user` counts per IP address (anonymous calls do), and says so once per
 * route: the usual cause is an auth guard that runs after the rate-limit guard, which RateLimitModule registers
 * as an APP_GUARD (global guards run before controller guards). The fixes the warning names are checked too: the
 * auth guard as an APP_GUARD registered before the module's (in the root module, or a module imported before
 * RateLimitModule: imported after it, it runs too late), and `registerGuard: false` with the guards in order.
 */
import {
  Controller,
  Get,
  Injectable,
  Logger,
  Module,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
} from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import request from 'supertest';
import { RateLimit, RateLimitGuard, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { ADAPTERS, bootApp } from './harness';

const ONE = { algorithm: 'fixed-window', limit: 1, window: '1h', by: 'user' } as const;

/** Stands in for an auth guard: `x-user` becomes `req.user.id` (on the Express or the Fastify request). */
@Injectable()
class FakeAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: Record<string, string>; user?: unknown }>();
    if (req.headers['x-user']) req.user = { id: req.headers['x-user'] };
    return true;
  }
}

/** The mistake: the auth guard on the controller, so the global rate-limit guard runs first. */
@Controller('late')
@UseGuards(FakeAuthGuard)
class LateAuthController {
  @Get('a')
  @RateLimit({ ...ONE, name: 'per-user' })
  a() {
    return 'a';
  }

  @Get('b')
  @RateLimit([
    { ...ONE, name: 'burst' },
    { ...ONE, name: 'daily', window: '1d' },
  ])
  b() {
    return 'b';
  }
}

/** Guards as they are registered (globally, or by `@UseGuards` on this controller in the last case). */
@Controller('users')
class UsersController {
  @Get()
  @RateLimit(ONE)
  list() {
    return 'users';
  }
}

@Controller('ordered')
@UseGuards(FakeAuthGuard, RateLimitGuard)
class OrderedController {
  @Get()
  @RateLimit(ONE)
  get() {
    return 'ordered';
  }
}

/** An app's auth module: its guard is global. */
@Module({ providers: [{ provide: APP_GUARD, useClass: FakeAuthGuard }] })
class AuthModule {}

const warning = (route: string, policies: string) =>
  `by: 'user' on ${route} (policy ${policies}): a call came with no req.user (or one without user.id or user.sub), so it was limited ` +
  `per IP address instead, as anonymous calls on this route will be. If the route requires authentication, your auth guard ran ` +
  `after the rate-limit guard, which RateLimitModule registers as an APP_GUARD (global guards run before controller guards): ` +
  `register the auth guard as an APP_GUARD too, in the module the app boots (your AppModule) or in a module imported before ` +
  `RateLimitModule (Nest runs global guards in the order it finds their modules, starting with the one it boots), or set ` +
  `registerGuard: false and list the rate-limit guard after it, @UseGuards(AuthGuard, RateLimitGuard); ` +
  `or give the policy a by function that finds the user itself. Logged once per route.`;

describe.each(ADAPTERS)("by: 'user' without a user on %s", (adapter) => {
  let app: INestApplication;
  let warn: jest.SpyInstance;
  /** The `by: 'user'` warnings logged so far, each with its logger's context. */
  const warnings = () =>
    warn.mock.calls.flatMap(([message], i) =>
      typeof message === 'string' && message.startsWith("by: 'user'")
        ? [{ context: (warn.mock.contexts[i] as { context?: string }).context, message }]
        : [],
    );
  const boot = async (options: RateLimitModuleOptions, controllers: Array<new () => unknown>, authFirst = false) => {
    const providers = authFirst ? [{ provide: APP_GUARD, useClass: FakeAuthGuard }] : [];
    app = await bootApp({ adapter, imports: [RateLimitModule.forRoot(options)], controllers, providers });
  };
  const get = (path: string, user?: string) =>
    request(app.getHttpServer())
      .get(path)
      .set(user ? { 'x-user': user } : {});

  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn');
  });
  afterEach(async () => {
    await app?.close();
    warn.mockRestore();
  });

  it('limits per IP as before, and warns once per route in the RateLimit context, naming the route and the fix', async () => {
    await boot({}, [LateAuthController]);
    // ann and bob share the IP's quota: the rate-limit guard saw neither of them.
    expect((await get('/late/a', 'ann')).status).toBe(200);
    expect((await get('/late/a', 'bob')).status).toBe(429);
    expect(warnings()).toEqual([{ context: 'RateLimit', message: warning('LateAuthController.a', "'per-user'") }]);
    expect((await get('/late/b', 'ann')).status).toBe(200);
    expect((await get('/late/b', 'ann')).status).toBe(429);
    expect((await get('/late/a', 'carol')).status).toBe(429);
    expect(warnings()).toEqual([
      { context: 'RateLimit', message: warning('LateAuthController.a', "'per-user'") },
      { context: 'RateLimit', message: warning('LateAuthController.b', "'burst', 'daily'") },
    ]);
  });

  it('says nothing when the auth guard is an APP_GUARD registered before the module: each user has a quota', async () => {
    await boot({}, [UsersController], true);
    expect((await get('/users', 'ann')).status).toBe(200);
    expect((await get('/users', 'ann')).status).toBe(429);
    expect((await get('/users', 'bob')).status).toBe(200);
    expect(warnings()).toEqual([]);
  });

  it.each([
    ['before', 0],
    ['after', 1],
  ] as const)('with the auth APP_GUARD in a module imported %s RateLimitModule: %d warning(s)', async (order, count) => {
    const imports = order === 'before' ? [AuthModule, RateLimitModule.forRoot({})] : [RateLimitModule.forRoot({}), AuthModule];
    app = await bootApp({ adapter, imports, controllers: [UsersController] });
    expect((await get('/users', 'ann')).status).toBe(200);
    expect((await get('/users', 'bob')).status).toBe(order === 'before' ? 200 : 429);
    expect(warnings()).toHaveLength(count);
  });

  it('says nothing with registerGuard: false and @UseGuards(AuthGuard, RateLimitGuard)', async () => {
    await boot({ registerGuard: false }, [OrderedController]);
    expect((await get('/ordered', 'ann')).status).toBe(200);
    expect((await get('/ordered', 'ann')).status).toBe(429);
    expect((await get('/ordered', 'bob')).status).toBe(200);
    expect(warnings()).toEqual([]);
  });
});
