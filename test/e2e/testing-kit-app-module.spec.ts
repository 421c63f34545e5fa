import { Controller, Get, Injectable, Module, type INestApplication, type Type } from '@nestjs/common';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test, type TestingModule } from '@nestjs/testing';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import request from 'supertest';
import { RateLimit, RateLimitModule, RateLimiterService } from '../../lib';
import {
  RATE_LIMIT_TEST_START,
  RateLimitTestClock,
  RateLimitTestingModule,
  expectNotRateLimited,
  expectRateLimited,
} from '../../lib/testing';

// Every Redis client library this package can drive, recorded when something requires it: the kit must
// keep an app that configures Redis from loading any of them.
const mockClientsLoaded: string[] = [];
jest.mock('ioredis', () => (mockClientsLoaded.push('ioredis'), jest.requireActual('ioredis')));
jest.mock('redis', () => (mockClientsLoaded.push('redis'), jest.requireActual('redis')));
jest.mock('@valkey/valkey-glide', () => (mockClientsLoaded.push('@valkey/valkey-glide'), jest.requireActual('@valkey/valkey-glide')));

/** A TCP server standing where the apps' Redis would be: it counts the connections it gets, and drops them. */
let redis: Server;
let connections = 0;
let redisUrl: string;
beforeAll(async () => {
  redis = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => redis.listen(0, '127.0.0.1', resolve));
  redisUrl = `redis://127.0.0.1:${(redis.address() as AddressInfo).port}`;
});
afterAll(() => stopRedis());
function stopRedis(): Promise<void> {
  return new Promise((resolve) => (redis.listening ? redis.close(() => resolve()) : resolve()));
}
beforeEach(() => {
  connections = 0;
  mockClientsLoaded.length = 0;
});

@Controller('cats')
class CatsController {
  /** Only the module's defaultPolicy applies. */
  @Get()
  findAll(): string[] {
    return ['Tom'];
  }

  @Get('login')
  @RateLimit('fixed-window', 2, '1m')
  login(): string {
    return 'welcome';
  }
}

/** Stands for the app's ConfigService. */
@Injectable()
class RateLimitConfig {
  readonly redisUrl = redisUrl;
}

@Module({ providers: [RateLimitConfig], exports: [RateLimitConfig] })
class ConfigModule {}

/** The apps under test, built once the fake Redis listens: as users write them, none knowing about tests. */
function appModules(): Record<string, Type<unknown>> {
  @Module({
    imports: [RateLimitModule.forRoot({ redis: redisUrl, defaultPolicy: { algorithm: 'fixed-window', limit: 2, window: '1m' } })],
    controllers: [CatsController],
  })
  class ForRootAppModule {}

  @Module({
    imports: [
      RateLimitModule.forRootAsync({
        imports: [ConfigModule],
        inject: [RateLimitConfig],
        useFactory: (config: RateLimitConfig) => ({
          redis: config.redisUrl,
          defaultPolicy: { algorithm: 'fixed-window', limit: 2, window: '1m' },
        }),
      }),
    ],
    controllers: [CatsController],
  })
  class ForRootAsyncAppModule {}

  // RateLimitModule two imports deep, and not global.
  @Module({
    imports: [
      RateLimitModule.forRoot({ redis: redisUrl, global: false, defaultPolicy: { algorithm: 'fixed-window', limit: 2, window: '1m' } }),
    ],
    controllers: [CatsController],
  })
  class CatsModule {}
  @Module({ imports: [CatsModule] })
  class NestedAppModule {}

  return { forRoot: ForRootAppModule, forRootAsync: ForRootAsyncAppModule, nested: NestedAppModule };
}

async function boot(moduleRef: TestingModule, platform: 'express' | 'fastify'): Promise<INestApplication> {
  if (platform === 'express') {
    const app = moduleRef.createNestApplication({ logger: false });
    await app.init();
    return app;
  }
  const app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), { logger: false });
  await app.init();
  await app.getHttpAdapter().getInstance().ready();
  return app;
}

describe.each(['express', 'fastify'] as const)('RateLimitTestingModule.override on %s', (platform) => {
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  async function bootOverridden(appModule: Type<unknown>, clock: RateLimitTestClock): Promise<INestApplication> {
    const builder = Test.createTestingModule({ imports: [appModule] });
    expect(RateLimitTestingModule.override(builder, clock)).toBe(builder);
    app = await boot(await builder.compile(), platform);
    return app;
  }

  it.each(['forRoot', 'forRootAsync', 'nested'])(
    'an AppModule with RateLimitModule.%s on Redis decides on the memory store and the test clock, and never touches Redis',
    async (kind) => {
      const clock = new RateLimitTestClock();
      const server = (await bootOverridden(appModules()[kind], clock)).getHttpServer();

      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await request(server).get('/cats')).status);
      clock.advance('1m');
      statuses.push((await request(server).get('/cats')).status);
      expect(statuses).toEqual([200, 200, 429, 200]);

      expect(connections).toBe(0);
      expect(mockClientsLoaded).toEqual([]);
    },
  );

  it('keeps the numbers exact: headers, Retry-After and the reset count from the test clock', async () => {
    const clock = new RateLimitTestClock();
    const server = (await bootOverridden(appModules().forRoot, clock)).getHttpServer();
    expectNotRateLimited(await request(server).get('/cats/login'), { remaining: 1 });
    expectNotRateLimited(await request(server).get('/cats/login'), { remaining: 0 });
    expectRateLimited(await request(server).get('/cats/login'), { retryAfter: 60, remaining: 0 });
    clock.advance(59_999);
    expectRateLimited(await request(server).get('/cats/login'), { retryAfter: 1, remaining: 0 });
    clock.advance(1);
    const next = expectNotRateLimited(await request(server).get('/cats/login'), { remaining: 1 });
    expect(next.quotas).toEqual([{ policy: expect.any(String), remaining: 1, resetSeconds: 60 }]);
    expect(clock.now()).toBe(RATE_LIMIT_TEST_START + 60_000);
  });

  it("drives the app's RateLimiterService on the test clock too", async () => {
    const clock = new RateLimitTestClock();
    const limiter = (await bootOverridden(appModules().forRootAsync, clock)).get(RateLimiterService);
    const policy = { algorithm: 'gcra', limit: 2, window: '1s' } as const;
    expect((await limiter.consume(policy, 'job')).allowed).toBe(true);
    expect((await limiter.consume(policy, 'job')).allowed).toBe(true);
    expect(await limiter.consume(policy, 'job')).toMatchObject({ allowed: false, retryAfterMs: 500 });
    clock.advance(500);
    expect((await limiter.consume(policy, 'job')).allowed).toBe(true);
  });
});

describe('without RateLimitTestingModule.override', () => {
  it('the same AppModule connects to its Redis (so the checks above can fail)', async () => {
    const compiled = Test.createTestingModule({ imports: [appModules().forRoot] }).compile();
    // Once connected, stop listening: the refused reconnection ends the module's wait for Redis at startup.
    while (connections === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await stopRedis();
    const moduleRef = await compiled;
    try {
      expect(connections).toBeGreaterThan(0);
      expect(mockClientsLoaded).toEqual(['ioredis']);
    } finally {
      await moduleRef.close();
    }
  });
});

describe("the README's testing example", () => {
  it('is test/e2e/testing-kit-readme-{express,fastify}.spec.ts, with the package and the app imported as an app imports them', () => {
    const spec = (platform: string) =>
      readFileSync(join(__dirname, `testing-kit-readme-${platform}.spec.ts`), 'utf8')
        .replace("from '../../lib/testing'", "from 'nestjs-redis-ratelimit/testing'")
        .replace("from './testing-kit-app'", "from '../src/app.module'");
    const readme = readFileSync(join(__dirname, '../../docs/testing.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Testing your app'), readme.indexOf('\n## ', readme.indexOf('## Testing your app') + 1));
    const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code]) => code);
    expect(blocks).toEqual([
      `// test/cats.e2e-spec.ts (an app on Express)\n${spec('express')}`,
      `// test/cats.e2e-spec.ts (an app on Fastify)\n${spec('fastify')}`,
    ]);
  });
});
