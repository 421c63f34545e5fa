import type { DynamicModule, INestApplication, ModuleMetadata, Type } from '@nestjs/common';
import { ExpressAdapter, type NestExpressApplication } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import { RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { startRedis, type RedisProcess } from '../support/redis-server';

/** The HTTP adapters every e2e suite runs on. */
export type AdapterName = 'express' | 'fastify';
/** The stores every e2e suite runs against. */
export type StoreName = 'memory' | 'redis';

/** Every adapter × store combination, for `describe.each`. */
export const MATRIX: Array<{ adapter: AdapterName; store: StoreName }> = [
  { adapter: 'express', store: 'memory' },
  { adapter: 'express', store: 'redis' },
  { adapter: 'fastify', store: 'memory' },
  { adapter: 'fastify', store: 'redis' },
];

/** Every adapter, for suites where the store does not matter. */
export const ADAPTERS: AdapterName[] = ['express', 'fastify'];

/**
 * One redis-server and one connected client for a whole spec file (started lazily, only if a redis case
 * runs). Apps get the client rather than a URL so that their first request never races the connection.
 */
export class SharedRedis {
  private started: Promise<{ server: RedisProcess; client: Redis }> | undefined;

  client(): Promise<Redis> {
    this.started ??= startRedis().then(async (server) => {
      const client = new Redis(server.url);
      await client.ping();
      return { server, client };
    });
    return this.started.then(({ client }) => client);
  }

  async stop(): Promise<void> {
    if (!this.started) return;
    const { server, client } = await this.started;
    await client.quit();
    await server.stop();
  }
}

/**
 * A redis-server of each test's own, started before it (the test stops it to take the store away) and stopped
 * after it, with a client for the module that tolerates the stop.
 */
export function redisPerTest(): { readonly server: RedisProcess; readonly client: Redis } {
  const current = {} as { server: RedisProcess; client: Redis };
  beforeEach(async () => {
    current.server = await startRedis();
    current.client = new Redis(current.server.url, { maxRetriesPerRequest: 0 });
    current.client.on('error', () => undefined); // the server is stopped on purpose
    await current.client.ping();
  });
  afterEach(async () => {
    current.client.disconnect();
    await current.server.stop();
  });
  return current;
}

let prefixes = 0;

/**
 * Module options for `store`, with a fresh key prefix so apps sharing a Redis never see each other's counters.
 * Redis gets a long deadline: these suites check exact limits, and on a busy machine redis-server itself may
 * wait for a core longer than the default 100 ms (suites about the deadline set their own `storeTimeoutMs`).
 */
export async function storeOptions(
  store: StoreName,
  redis: SharedRedis,
): Promise<Pick<RateLimitModuleOptions, 'redis' | 'prefix' | 'storeTimeoutMs'>> {
  const prefix = `e2e${process.pid}-${++prefixes}`;
  return store === 'redis' ? { redis: await redis.client(), prefix, storeTimeoutMs: EXACT_STORE_TIMEOUT_MS } : { prefix };
}

/** The deadline of suites that check exact limits on Redis, not the deadline itself. */
export const EXACT_STORE_TIMEOUT_MS = 5_000;

/** How to boot one test app. */
export interface BootOptions extends Pick<ModuleMetadata, 'controllers' | 'providers'> {
  adapter: AdapterName;
  /** `RateLimitModule.forRoot(...)`, `forRootAsync(...)` or any module importing it. */
  imports: Array<DynamicModule | Type<unknown>>;
  /** Express `trust proxy` / Fastify `trustProxy`. */
  trustProxy?: boolean;
}

/** Compiles and initialises a Nest app on the chosen adapter, ready for supertest on `getHttpServer()`. */
export async function bootApp({
  adapter,
  imports,
  controllers = [],
  providers = [],
  trustProxy = false,
}: BootOptions): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports, controllers, providers }).compile();
  return initApp(moduleRef.createNestApplication.bind(moduleRef), adapter, trustProxy);
}

type Create = (adapter: ExpressAdapter | FastifyAdapter, options?: { logger: false }) => INestApplication;

/** Creates the app on `adapter` and waits until it is listening-ready (Fastify needs `ready()`). */
export async function initApp(create: Create, adapter: AdapterName, trustProxy = false): Promise<INestApplication> {
  if (adapter === 'express') {
    const app = create(new ExpressAdapter(), { logger: false }) as NestExpressApplication;
    if (trustProxy) app.set('trust proxy', true);
    await app.init();
    return app;
  }
  const app = create(new FastifyAdapter({ trustProxy }), { logger: false });
  await app.init();
  await (app.getHttpAdapter().getInstance() as { ready(): Promise<unknown> }).ready();
  return app;
}

/** Milliseconds to wait. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Waits out the end of the current aligned minute when it is less than `marginMs` away: a test that counts
 * requests in a 1-minute `fixed-window` on the real clock would see its count start over if two of its
 * requests straddled the boundary (a ~0.2 % chance per test otherwise).
 */
export async function clearOfMinuteEnd(marginMs = 3_000): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < marginMs) await sleep(left + 20);
}

/** Shorthand used by most suites: `RateLimitModule.forRoot` on `store` plus `extra` options. */
export async function rateLimitModule(store: StoreName, redis: SharedRedis, extra: RateLimitModuleOptions = {}): Promise<DynamicModule> {
  return RateLimitModule.forRoot({ ...(await storeOptions(store, redis)), ...extra });
}
