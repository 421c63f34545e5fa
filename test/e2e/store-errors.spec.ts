/**
 * What requests get while the Redis store is down or stalled. By default (`onStoreError: 'insurance'`) an
 * in-process twin of each policy decides: it admits exactly the limit, and a request past it is an ordinary
 * 429 (body, `Retry-After` from the twin's wait, problem details, and each context's 429 shape) whose
 * decision keeps `reason: 'store-unavailable'`. `fail-closed` answers 503; `fail-open` admits everything.
 */
import { Controller, Get, type INestApplication, type INestMicroservice } from '@nestjs/common';
import { ClientProxyFactory, MessagePattern, Payload, Transport, type ClientProxy } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import { Query, Resolver } from '@nestjs/graphql';
import type { AddressInfo } from 'node:net';
import { lastValueFrom } from 'rxjs';
import { io, type Socket } from 'socket.io-client';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitDecisionEvent, type RateLimitModuleOptions } from '../../lib';
import { freePort } from '../support/redis-server';
import { apolloModule } from './graphql-app';
import { ADAPTERS, bootApp, MATRIX, rateLimitModule, redisPerTest, SharedRedis } from './harness';

@Controller()
class StoreController {
  @Get('limited')
  @RateLimit('fixed-window', 1, '1h')
  limited() {
    return 'limited';
  }

  /** Two per minute; a `sliding-log`, so the wait past it is exact: 60 s after the first admission. */
  @Get('two')
  @RateLimit('sliding-log', 2, '1m')
  two() {
    return 'two';
  }
}

/**
 * Checks a `Retry-After` of the `sliding-log` of two per minute once it is full: 60 s after its first
 * admission, so 60 less the whole seconds since then (`elapsedMs` bounds them), rounded up.
 */
function expectMinuteWait(seconds: number, elapsedMs: number): void {
  expect(Number.isInteger(seconds)).toBe(true);
  expect(seconds).toBeLessThanOrEqual(60);
  expect(seconds).toBeGreaterThanOrEqual(Math.ceil((60_000 - elapsedMs) / 1000));
}

/** Module options for the app of each test: its own Redis, a short deadline, and `extra`. */
const storeDown = (redis: ReturnType<typeof redisPerTest>, extra: RateLimitModuleOptions = {}) =>
  RateLimitModule.forRoot({ redis: redis.client, storeTimeoutMs: 50, ...extra });

const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

describe.each(ADAPTERS)('when the Redis store is down, on %s', (adapter) => {
  const redis = redisPerTest();
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  const boot = async (options: RateLimitModuleOptions) => {
    app = await bootApp({ adapter, imports: [storeDown(redis, options)], controllers: [StoreController] });
  };
  const bootAndStopRedis = async (options: RateLimitModuleOptions) => {
    await boot(options);
    await redis.server.stop();
  };
  const get = (path: string) => request(app!.getHttpServer()).get(path);

  it("answers 503 with onStoreError: 'fail-closed'", async () => {
    await bootAndStopRedis({ onStoreError: 'fail-closed' });
    const res = await get('/limited');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({ statusCode: 503, message: 'Rate limit store unavailable', error: 'Service Unavailable' });
    expect(res.headers['retry-after']).toBeUndefined();
  });

  it("lets every request through with onStoreError: 'fail-open' (unlimited, when chosen explicitly)", async () => {
    await bootAndStopRedis({ onStoreError: 'fail-open' });
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await get('/two')).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
  });

  describe.each([
    { what: "onStoreError: 'insurance'", options: { onStoreError: 'insurance' } as RateLimitModuleOptions },
    { what: 'no onStoreError (the default, insurance)', options: {} },
  ])('with $what', ({ options }) => {
    it('admits exactly the limit, then answers 429 with Retry-After and the usual body; the decisions say it was the fallback', async () => {
      const events: RateLimitDecisionEvent[] = [];
      await bootAndStopRedis({ ...options, hooks: { decision: (event) => events.push(event) } });
      const started = Date.now();
      const responses = [];
      for (let i = 0; i < 4; i++) responses.push(await get('/two'));
      const elapsed = Date.now() - started;

      expect(responses.map((r) => r.status)).toEqual([200, 200, 429, 429]);
      for (const res of responses) {
        // The policy as configured, but no `RateLimit` member: the twin's count is not the client's real quota.
        expect(res.headers['ratelimit-policy']).toBe('"default";q=2;w=60');
        expect(res.headers['ratelimit']).toBeUndefined();
      }
      expect(responses.slice(0, 2).map((r) => r.headers['retry-after'])).toEqual([undefined, undefined]);
      for (const limited of responses.slice(2)) {
        expect(limited.headers['retry-after']).toMatch(/^\d+$/);
        const retryAfter = Number(limited.headers['retry-after']);
        expectMinuteWait(retryAfter, elapsed);
        expect(limited.body).toEqual({ statusCode: 429, message: 'Too Many Requests', error: 'Too Many Requests', retryAfter });
      }
      expect(events.map((e) => e.decisions.map((d) => `${d.allowed}/${d.reason}`))).toEqual([
        ['true/store-unavailable'],
        ['true/store-unavailable'],
        ['false/store-unavailable'],
        ['false/store-unavailable'],
      ]);
      expect(events.map((e) => e.fallbacks)).toEqual(new Array(4).fill(['insurance']));
    });

    it("answers the 429 as quota-exceeded problem details with errorFormat: 'problem+json'", async () => {
      await bootAndStopRedis({ ...options, errorFormat: 'problem+json' });
      const started = Date.now();
      const statuses = [(await get('/two')).status, (await get('/two')).status];
      const limited = await get('/two');
      const elapsed = Date.now() - started;

      expect(statuses).toEqual([200, 200]);
      expect(limited.status).toBe(429);
      expect(limited.headers['content-type']).toBe('application/problem+json; charset=utf-8');
      expectMinuteWait(Number(limited.headers['retry-after']), elapsed);
      expect(JSON.parse(limited.text)).toEqual({
        type: QUOTA_EXCEEDED,
        title: 'Quota Exceeded',
        status: 429,
        detail: 'Too Many Requests',
        'violated-policies': ['default'],
      });
    });

    it('keeps the limit while Redis stalls (SIGSTOP): exactly 2 admitted, then 429', async () => {
      await boot(options);
      redis.server.pause();
      try {
        const started = Date.now();
        const responses = [];
        for (let i = 0; i < 3; i++) responses.push(await get('/two'));
        const elapsed = Date.now() - started;
        expect(responses.map((r) => r.status)).toEqual([200, 200, 429]);
        expectMinuteWait(Number(responses[2].headers['retry-after']), elapsed);
      } finally {
        redis.server.resume();
      }
    });
  });
});

const typeDefs = /* GraphQL */ `
  type Query {
    cats: [String!]
  }
`;

@Resolver()
class CatsResolver {
  @Query('cats')
  @RateLimit('sliding-log', 2, '1m')
  cats() {
    return ['tom'];
  }
}

describe.each(ADAPTERS)('GraphQL (Apollo on %s) with the Redis store down and the default onStoreError', (adapter) => {
  const redis = redisPerTest();
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
  });

  it("answers a field past the insurance twin's limit with the RATE_LIMITED error of a 429 and Retry-After", async () => {
    app = await bootApp({ adapter, imports: [storeDown(redis), apolloModule(typeDefs, { adapter })], providers: [CatsResolver] });
    await redis.server.stop();
    const gql = () => request(app!.getHttpServer()).post('/graphql').send({ query: '{ cats }' });
    const started = Date.now();
    const responses = [await gql(), await gql(), await gql()];
    const elapsed = Date.now() - started;

    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(responses.slice(0, 2).map((r) => r.body)).toEqual([{ data: { cats: ['tom'] } }, { data: { cats: ['tom'] } }]);
    const limited = responses[2];
    const retryAfter = Number(limited.headers['retry-after']);
    expectMinuteWait(retryAfter, elapsed);
    expect(limited.body).toEqual({
      data: { cats: null },
      errors: [
        {
          message: 'Too Many Requests',
          locations: [{ line: 1, column: 3 }],
          path: ['cats'],
          extensions: { code: 'RATE_LIMITED', retryAfter },
        },
      ],
    });
  });
});

@WebSocketGateway()
class ChatGateway {
  @SubscribeMessage('chat')
  @RateLimit('sliding-log', 2, '1m')
  chat(@MessageBody() text: string) {
    return `echo:${text}`;
  }
}

describe('WebSocket gateway (socket.io) with the Redis store down and the default onStoreError', () => {
  const redis = redisPerTest();
  let app: INestApplication | undefined;
  let socket: Socket | undefined;
  afterEach(async () => {
    socket?.disconnect();
    await app?.close();
  });

  it("answers a message past the insurance twin's limit with the 429 exception event", async () => {
    app = await bootApp({ adapter: 'express', imports: [storeDown(redis)], providers: [ChatGateway] });
    await app.listen(0, '127.0.0.1');
    await redis.server.stop();
    socket = io(`http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`, {
      transports: ['websocket'],
      forceNew: true,
      reconnection: false,
    });
    const exceptions: unknown[] = [];
    socket.on('exception', (payload: unknown) => exceptions.push(payload));
    await new Promise<void>((resolve, reject) => {
      socket!.once('connect', resolve);
      socket!.once('connect_error', reject);
    });
    // Answered messages may take a while on a busy machine; the rejected one's short wait only bounds the test.
    const send = (text: string, waitMs = 10_000) =>
      socket!
        .timeout(waitMs)
        .emitWithAck('chat', text)
        .catch(() => 'no ack');

    const started = Date.now();
    const replies = [await send('a'), await send('b'), await send('c', 300)];
    const elapsed = Date.now() - started;

    expect(replies).toEqual(['echo:a', 'echo:b', 'no ack']);
    expect(exceptions).toEqual([{ status: 'error', statusCode: 429, message: 'Too Many Requests', retryAfter: expect.any(Number) }]);
    expectMinuteWait((exceptions[0] as { retryAfter: number }).retryAfter, elapsed);
    expect(socket.connected).toBe(true);
  });
});

@Controller()
class MathController {
  @MessagePattern({ cmd: 'sum' })
  @RateLimit('sliding-log', 2, '1m')
  sum(@Payload() numbers: number[]) {
    return numbers.reduce((a, b) => a + b, 0);
  }
}

describe('TCP microservice with the Redis store down and the default onStoreError', () => {
  const redis = redisPerTest();
  let service: INestMicroservice | undefined;
  let client: ClientProxy | undefined;
  afterEach(async () => {
    await client?.close();
    await service?.close();
  });

  it("answers a message past the insurance twin's limit with the 429 RpcException payload", async () => {
    const port = await freePort();
    const moduleRef = await Test.createTestingModule({ imports: [storeDown(redis)], controllers: [MathController] }).compile();
    service = moduleRef.createNestMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port }, logger: false });
    await service.listen();
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
    await client.connect();
    await redis.server.stop();
    const send = (numbers: number[]) =>
      lastValueFrom(client!.send<number>({ cmd: 'sum' }, numbers)).catch((error: unknown) => ({ rejected: error }));

    const started = Date.now();
    const replies = [await send([1, 1]), await send([2, 2]), await send([3, 3])];
    const elapsed = Date.now() - started;

    expect(replies.slice(0, 2)).toEqual([2, 4]);
    expect(replies[2]).toEqual({ rejected: { statusCode: 429, message: 'Too Many Requests', retryAfter: expect.any(Number) } });
    expectMinuteWait((replies[2] as { rejected: { retryAfter: number } }).rejected.retryAfter, elapsed);
  });
});

describe.each(MATRIX)("module-wide mode: 'shadow' on $adapter with the $store store", ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis, { mode: 'shadow', shadowHeaders: true })],
      controllers: [StoreController],
    });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  it('never rejects, and reports the quota with shadowHeaders', async () => {
    const responses = [];
    for (let i = 0; i < 3; i++) responses.push(await request(app.getHttpServer()).get('/limited'));
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(responses.map((r) => /r=(\d+)/.exec(r.headers['ratelimit'])?.[1])).toEqual(['0', '0', '0']);
  });
});
