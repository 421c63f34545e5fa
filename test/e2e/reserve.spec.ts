/**
 * Policy `reserve` over HTTP, on Express and Fastify, on the memory store and on Redis (a route of one policy
 * goes to the one-policy script, a route of two to decide.lua's general path): capacity 100 with 20 % kept for
 * `'critical'` calls admits exactly 80 `'default'` ones, refuses the 81st with a 503 and `Retry-After` (problem
 * type `temporary-reduced-capacity` with problem details on), and admits `'critical'` calls up to exactly 100,
 * the 101st refused with the plain 429. Every counting algorithm, and `concurrency` with its calls held in flight.
 */
import { Controller, Get, Inject, type INestApplication, type Type } from '@nestjs/common';
import type { Server } from 'node:http';
import request, { type Response } from 'supertest';
import { RateLimit, type RateLimitModuleOptions, type RateLimitPolicy } from '../../lib';
import { RATE_LIMIT_ALGORITHMS, type RateLimitAlgorithmName } from '../../lib/interfaces/policy.interface';
import { Gate } from '../support/gate';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

const TEMPORARY_REDUCED_CAPACITY = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';
const RESERVED_MESSAGE = 'Service Unavailable: the capacity left is reserved for more critical requests; retry later.';
const SHAPES = ['one', 'two'] as const;

/** Capacity 100, 20 % kept for critical calls; windows long enough that nothing refills during a test. */
function quota(algorithm: RateLimitAlgorithmName): RateLimitPolicy {
  return {
    algorithm,
    name: 'quota',
    limit: 100,
    window: algorithm === 'concurrency' ? '1m' : '1d',
    reserve: { critical: 0.2 },
    ...(algorithm === 'leaky-bucket' ? { delay: false } : {}),
  };
}

/** A second policy of the route, never the one that refuses: the decision then takes decide.lua's general path. */
const OUTER: RateLimitPolicy = { algorithm: 'fixed-window', name: 'outer', limit: 1_000, window: '1d' };

/** `GET /<shape>/<algorithm>` for every algorithm and shape; `concurrency` handlers wait at the gate. */
function reserveController(): Type<unknown> {
  @Controller()
  class ReserveController {
    constructor(@Inject(Gate) readonly gate: Gate) {}
  }
  for (const algorithm of RATE_LIMIT_ALGORITHMS) {
    for (const shape of SHAPES) {
      const name = `${shape}_${algorithm.replace('-', '_')}`;
      const handler =
        algorithm === 'concurrency'
          ? async function (this: ReserveController) {
              await this.gate.pass();
              return 'ok';
            }
          : () => 'ok';
      Object.defineProperty(ReserveController.prototype, name, { value: handler, writable: true, configurable: true });
      const descriptor = Object.getOwnPropertyDescriptor(ReserveController.prototype, name)!;
      RateLimit(shape === 'one' ? quota(algorithm) : [quota(algorithm), OUTER])(ReserveController.prototype, name, descriptor);
      Get(`${shape}/${algorithm}`)(ReserveController.prototype, name, descriptor);
    }
  }
  return ReserveController;
}

/** The call's criticality is its `x-priority` header ('default' without one). */
const priority: NonNullable<RateLimitModuleOptions['priority']> = (ctx) =>
  ctx.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-priority'] === 'critical'
    ? 'critical'
    : 'default';

const redis = new SharedRedis();
afterAll(() => redis.stop());

describe.each(MATRIX)('reserve on $adapter, $store store', ({ adapter, store }) => {
  let app: INestApplication;
  let server: Server;
  let gate: Gate;

  async function boot(extra: RateLimitModuleOptions = {}): Promise<void> {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis, { priority, ...extra })],
      controllers: [reserveController()],
      providers: [Gate],
    });
    server = app.getHttpServer() as Server;
    gate = app.get(Gate);
  }

  afterEach(async () => {
    gate?.release();
    await app?.close();
  });

  const call = (path: string, critical = false) =>
    request(server)
      .get(path)
      .set(critical ? { 'x-priority': 'critical' } : {})
      .then((r) => r);

  /** `n` calls to `path`, 20 at a time. */
  async function calls(path: string, n: number, critical = false): Promise<Response[]> {
    const answers: Response[] = [];
    for (let done = 0; done < n; done += 20)
      answers.push(...(await Promise.all(Array.from({ length: Math.min(20, n - done) }, () => call(path, critical)))));
    return answers;
  }

  /** `n` calls to `path` that wait inside the handler; resolves once all of them are. */
  async function held(path: string, n: number, critical = false): Promise<Array<Promise<Response>>> {
    const before = gate.inside;
    const pending = Array.from({ length: n }, () => call(path, critical));
    while (gate.inside < before + n) await sleep(5);
    return pending;
  }

  function expectReserved(refused: Response): void {
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(refused.body).toEqual({
      statusCode: 503,
      message: RESERVED_MESSAGE,
      error: 'Service Unavailable',
      retryAfter: Number(refused.headers['retry-after']),
    });
    // The policy's member says what the call's class has left: nothing.
    expect(refused.headers['ratelimit']).toMatch(/^"quota";r=0(;t=\d+)?$/);
  }

  for (const algorithm of RATE_LIMIT_ALGORITHMS) {
    for (const shape of SHAPES) {
      const path = `/${shape}/${algorithm}`;
      it(`${algorithm}, ${shape === 'one' ? 'one policy' : 'two policies'}: 80 default calls, then 503; critical ones to exactly 100, then 429`, async () => {
        await boot();
        if (algorithm === 'concurrency') {
          const defaults = await held(path, 80);
          expectReserved(await call(path));
          const criticals = await held(path, 20, true);
          const over = await call(path, true);
          expect(over.status).toBe(429);
          gate.release();
          const answers = await Promise.all([...defaults, ...criticals]);
          expect(answers.filter((a) => a.status === 200)).toHaveLength(100);
          return;
        }
        const defaults = await calls(path, 80);
        expect(defaults.map((a) => a.status)).toEqual(defaults.map(() => 200));
        expect(defaults.map((a) => Number(/r=(\d+)/.exec(a.headers['ratelimit'] as string)![1])).sort((a, b) => a - b)).toEqual(
          Array.from({ length: 80 }, (_, i) => i),
        );
        expectReserved(await call(path));
        // Nothing was charged for the refusal: the critical calls still find exactly 20 units.
        const criticals = await calls(path, 20, true);
        expect(criticals.map((a) => a.status)).toEqual(criticals.map(() => 200));
        const over = await call(path, true);
        expect(over.status).toBe(429);
        expect(over.body).toMatchObject({ statusCode: 429, error: 'Too Many Requests' });
        // A default call now meets the plain limit too: 429, not the reserve's 503.
        expect((await call(path)).status).toBe(429);
      });
    }
  }

  it("with problem details on, the 503 is of the draft's temporary-reduced-capacity type", async () => {
    await boot({ errorFormat: 'problem+json' });
    await calls('/two/gcra', 80);
    const refused = await call('/two/gcra');
    expect({ status: refused.status, type: refused.headers['content-type'] }).toEqual({
      status: 503,
      type: 'application/problem+json; charset=utf-8',
    });
    expect(refused.headers['retry-after']).toMatch(/^[1-9]\d*$/);
    expect(JSON.parse(refused.text)).toEqual({
      type: TEMPORARY_REDUCED_CAPACITY,
      title: 'Temporary Reduced Capacity',
      status: 503,
      detail: RESERVED_MESSAGE,
      'violated-policies': ['quota'],
    });
  });
});
