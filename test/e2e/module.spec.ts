import { Controller, Get, Injectable, Module, UseGuards, type INestApplication, type Type } from '@nestjs/common';
import request from 'supertest';
import {
  RateLimit,
  RateLimitGuard,
  RateLimitModule,
  type RateLimitModuleOptions,
  type RateLimitOptionsFactory,
  type RateLimitPolicy,
} from '../../lib';
import { ADAPTERS, bootApp, MATRIX, SharedRedis, storeOptions, type StoreName } from './harness';

@Controller('cats')
class CatsController {
  @Get()
  @RateLimit('fixed-window', 1, '1h')
  find() {
    return 'cats';
  }
}

/** Stands in for a configuration module (ConfigModule and friends). */
@Injectable()
class AppConfig {
  options: RateLimitModuleOptions = {};
}

@Injectable()
class RateLimitConfig implements RateLimitOptionsFactory {
  constructor(private readonly config: AppConfig) {}

  async createRateLimitOptions(): Promise<RateLimitModuleOptions> {
    return { ...this.config.options, headers: 'legacy' };
  }
}

describe.each(MATRIX)('module setup on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => redis.stop());

  /** A ConfigModule whose AppConfig carries the store options for this matrix cell. */
  const configured = async (extra: RateLimitModuleOptions = {}): Promise<Type<unknown>> => {
    const options = { ...(await storeOptions(store as StoreName, redis)), ...extra };
    @Module({ providers: [{ provide: AppConfig, useValue: { options } }], exports: [AppConfig] })
    class StoreConfigModule {}
    return StoreConfigModule;
  };
  const twice = async () => [
    (await request(app!.getHttpServer()).get('/cats')).status,
    (await request(app!.getHttpServer()).get('/cats')).status,
  ];

  it('forRootAsync with useFactory and inject', async () => {
    const config = await configured();
    const module = RateLimitModule.forRootAsync({
      imports: [config],
      inject: [AppConfig],
      useFactory: async (c: AppConfig) => ({ ...c.options, headers: 'both' }),
    });
    app = await bootApp({ adapter, imports: [module], controllers: [CatsController] });
    const first = await request(app.getHttpServer()).get('/cats');
    expect(first.headers['ratelimit-policy']).toBe('"default";q=1;w=3600');
    expect(first.headers['x-ratelimit-limit']).toBe('1');
    expect((await request(app.getHttpServer()).get('/cats')).status).toBe(429);
  });

  it('forRootAsync with useClass', async () => {
    const module = RateLimitModule.forRootAsync({ imports: [await configured()], useClass: RateLimitConfig });
    app = await bootApp({ adapter, imports: [module], controllers: [CatsController] });
    const first = await request(app.getHttpServer()).get('/cats');
    expect(first.headers['x-ratelimit-remaining']).toBe('0');
    expect(first.headers['ratelimit']).toBeUndefined();
    expect((await request(app.getHttpServer()).get('/cats')).status).toBe(429);
  });

  it('counts a request once when a route also has @UseGuards(RateLimitGuard)', async () => {
    @Controller('twice')
    @UseGuards(RateLimitGuard)
    class TwiceGuardedController {
      @Get()
      @RateLimit('fixed-window', 2, '1h')
      get() {
        return 'twice';
      }
    }
    app = await bootApp({
      adapter,
      imports: [RateLimitModule.forRoot(await storeOptions(store, redis))],
      controllers: [TwiceGuardedController],
    });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await request(app.getHttpServer()).get('/twice')).status);
    expect(statuses).toEqual([200, 200, 429]);
  });

  it('registerGuard: false leaves routes unlimited (forRoot)', async () => {
    app = await bootApp({
      adapter,
      imports: [RateLimitModule.forRoot({ ...(await storeOptions(store, redis)), registerGuard: false })],
      controllers: [CatsController],
    });
    expect(await twice()).toEqual([200, 200]);
  });

  it('registerGuard: false leaves routes unlimited (forRootAsync)', async () => {
    const module = RateLimitModule.forRootAsync({
      imports: [await configured({ registerGuard: false })],
      inject: [AppConfig],
      useFactory: (c: AppConfig) => c.options,
    });
    app = await bootApp({ adapter, imports: [module], controllers: [CatsController] });
    expect(await twice()).toEqual([200, 200]);
  });
});

describe.each(ADAPTERS)('bootstrap validation on %s', (adapter) => {
  const boot = (controllers: Type<unknown>[], options: RateLimitModuleOptions = {}) =>
    bootApp({ adapter, imports: [RateLimitModule.forRoot(options)], controllers }).then(async (app) => {
      await app.close();
      throw new Error('the app booted');
    });

  it('rejects an invalid module option, naming it', async () => {
    await expect(boot([], { headers: 'loud' as never })).rejects.toThrow(
      `RateLimitModule options: headers: "loud" must be one of 'ietf', 'legacy', 'both', 'none'.`,
    );
  });

  it('rejects a batchDecisions that is not a boolean', async () => {
    await expect(boot([], { batchDecisions: 'yes' as never })).rejects.toThrow(
      `RateLimitModule options: batchDecisions: "yes" must be true or false.`,
    );
  });

  it('rejects a shadowHeaders that is not a boolean', async () => {
    await expect(boot([], { shadowHeaders: 'yes' as never })).rejects.toThrow(
      `RateLimitModule options: shadowHeaders: "yes" must be true or false.`,
    );
  });

  it('rejects deadlines that are not whole milliseconds', async () => {
    await expect(boot([], { userFunctionTimeoutMs: 0 })).rejects.toThrow(
      `RateLimitModule options: userFunctionTimeoutMs: 0 must be a whole number of milliseconds ≥ 1.`,
    );
    await expect(boot([], { storeTimeoutMs: 2.5 })).rejects.toThrow(
      `RateLimitModule options: storeTimeoutMs: 2.5 must be a whole number of milliseconds ≥ 1.`,
    );
  });

  it('rejects an invalid defaultPolicy, naming the field', async () => {
    await expect(boot([], { defaultPolicy: { algorithm: 'token-bucket', limit: 10, window: '1 fortnight' as never } })).rejects.toThrow(
      `RateLimitModule options: defaultPolicy: window: "1 fortnight" is not a valid duration; use a positive whole number of milliseconds or a string such as '250ms', '1s', '1m', '1h', '1d'.`,
    );
  });

  it('rejects a bad handler decorator, naming controller, handler and field', async () => {
    @Controller()
    class OrdersController {
      @Get()
      @RateLimit('sliding-window', 0, '1m')
      list() {
        return [];
      }
    }
    await expect(boot([OrdersController])).rejects.toThrow('@RateLimit on OrdersController.list: limit: 0 must be a whole number ≥ 1.');
  });

  it('rejects a bad class decorator, naming the controller and the handler it applies to', async () => {
    @Controller()
    @RateLimit({ algorithm: 'sliding-windw', limit: 5, window: '1s' } as unknown as RateLimitPolicy)
    class UsersController {
      @Get()
      me() {
        return 'me';
      }
    }
    await expect(boot([UsersController])).rejects.toThrow(
      `@RateLimit on UsersController (applied to UsersController.me): algorithm: "sliding-windw" is not a known algorithm; use one of 'fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra', 'leaky-bucket', 'concurrency'.`,
    );
  });

  it('rejects two policies with the same name on one route', async () => {
    @Controller()
    class PaymentsController {
      @Get()
      @RateLimit([
        { algorithm: 'gcra', limit: 5, window: '1s' },
        { algorithm: 'fixed-window', limit: 100, window: '1d' },
      ])
      pay() {
        return 'paid';
      }
    }
    await expect(boot([PaymentsController])).rejects.toThrow(
      "@RateLimit on PaymentsController.pay: name: two policies are named 'default'; give each policy of a route its own name.",
    );
  });

  it('names the policy of a list that is wrong', async () => {
    @Controller()
    class ReportsController {
      @Get()
      @RateLimit([
        { name: 'burst', algorithm: 'gcra', limit: 5, window: '1s' },
        { name: 'daily', algorithm: 'fixed-window', limit: 100, window: '1d', countOnly: 'sometimes' as never },
      ])
      build() {
        return 'report';
      }
    }
    await expect(boot([ReportsController])).rejects.toThrow(
      `@RateLimit on ReportsController.build, policy 2 of 2: countOnly: "sometimes" must be one of 'failed', 'succeeded'.`,
    );
  });
});
