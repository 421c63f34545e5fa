import { Controller, Get, Logger, type ExecutionContext, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, type RateLimitPolicy } from '../../lib';
import { fieldMembers } from '../support/rate-limit-fields';
import { bootApp, MATRIX, rateLimitModule, SharedRedis } from './harness';

const DEADLINE_MS = 100;

const hangs = (c: ExecutionContext) => c.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-hang'] === '1';
/** `value`, or a promise that never settles when the request asks for it. */
const orNever =
  <T>(value: T) =>
  (c: ExecutionContext): T | Promise<T> =>
    hangs(c) ? new Promise<T>(() => undefined) : value;

/** Per IP: one lease at a time. Decided in parallel with the tenant's group, which has its own tracker. */
const SLOTS: RateLimitPolicy = { name: 'slots', algorithm: 'concurrency', limit: 1, window: '1m' };
const TENANT: RateLimitPolicy = { name: 'tenant', algorithm: 'sliding-log', limit: 100, window: '1m', by: () => 'tenant-1' };

@Controller()
class UserFunctionsController {
  @Get('by')
  @RateLimit([SLOTS, { ...TENANT, by: orNever('tenant-1') }])
  by() {
    return 'ok';
  }

  @Get('limit')
  @RateLimit([SLOTS, { ...TENANT, limit: orNever(100) }])
  limit() {
    return 'ok';
  }

  @Get('window')
  @RateLimit([SLOTS, { ...TENANT, window: orNever('1m' as const) }])
  window() {
    return 'ok';
  }

  @Get('cost')
  @RateLimit([SLOTS, { ...TENANT, cost: orNever(1) }])
  cost() {
    return 'ok';
  }
}

describe.each(MATRIX)('policy functions that never settle, on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis, { userFunctionTimeoutMs: DEADLINE_MS })],
      controllers: [UserFunctionsController],
    });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  it.each(['by', 'limit', 'window', 'cost'])(
    'a %s function: the request fails with a 500 naming it within the deadline, and the other group’s lease is free again',
    async (fn) => {
      const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
      try {
        const started = performance.now();
        const hung = await request(app.getHttpServer()).get(`/${fn}`).set('x-hang', '1').timeout(2_000);
        const elapsed = performance.now() - started;
        console.log(`${adapter}/${store}: a ${fn} function that never settles: ${hung.status} after ${Math.round(elapsed)} ms`);
        expect(hung.status).toBe(500);
        expect(elapsed).toBeLessThan(DEADLINE_MS + 400);
        const messages = logged.mock.calls.map(([message]) => String(message));
        expect(messages).toContainEqual(
          expect.stringContaining(
            `@RateLimit on UserFunctionsController.${fn}, policy 2 of 2 ('tenant'): ${fn}: the function did not settle within ${DEADLINE_MS} ms (userFunctionTimeoutMs)`,
          ),
        );
        // The 'slots' lease the first request took in parallel is back: a second request gets it.
        const next = await request(app.getHttpServer()).get(`/${fn}`).timeout(2_000);
        expect(next.status).toBe(200);
        // Its own lease, just taken, is the only one; the hung request charged the tenant nothing.
        expect(fieldMembers(next.headers['ratelimit'])).toEqual([
          { name: 'slots', r: 0 },
          { name: 'tenant', r: 99, t: 60 },
        ]);
      } finally {
        logged.mockRestore();
      }
    },
  );
});
