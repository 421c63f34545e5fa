import { Controller, type INestMicroservice } from '@nestjs/common';
import { ClientProxyFactory, MessagePattern, Payload, Transport, type ClientProxy } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { lastValueFrom } from 'rxjs';
import { RateLimit, RateLimitModule, RateLimitPriority, type RateLimitRpcErrorPayload } from '../../lib';
import { pressureSignal } from '../support/pressure';
import { freePort } from '../support/redis-server';
import { rateLimitModule, SharedRedis, type StoreName } from './harness';

@Controller()
class MathController {
  /** One quota for the pattern: its messages carry no id. */
  @MessagePattern({ cmd: 'sum' })
  @RateLimit('sliding-log', 3, '1m')
  sum(@Payload() numbers: number[]) {
    return numbers.reduce((a, b) => a + b, 0);
  }

  /** One quota per `userId`, else per `id`, of the message. */
  @MessagePattern('orders.get')
  @RateLimit('sliding-log', 1, '1m', { name: 'orders' })
  order(@Payload() data: { id: number; userId?: string }) {
    return { order: data.id };
  }

  @MessagePattern('health')
  health() {
    return 'ok';
  }
}

const LIMITED: RateLimitRpcErrorPayload = { statusCode: 429, message: 'Too Many Requests', retryAfter: 60 };

const stores: StoreName[] = ['memory', 'redis'];

describe.each(stores)('TCP microservice with the %s store', (store) => {
  const redis = new SharedRedis();
  let service: INestMicroservice;
  let client: ClientProxy;

  beforeAll(async () => {
    const port = await freePort();
    const moduleRef = await Test.createTestingModule({
      imports: [await rateLimitModule(store, redis)],
      controllers: [MathController],
    }).compile();
    service = moduleRef.createNestMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port }, logger: false });
    await service.listen();
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
    await client.connect();
  });
  afterAll(async () => {
    await client?.close();
    await service?.close();
    await redis.stop();
  });

  /** The reply, or `{ rejected: <error> }` when the message was answered with an error. */
  const send = (pattern: unknown, data: unknown) =>
    lastValueFrom(client.send<unknown>(pattern, data)).catch((error: unknown) => ({ rejected: error }));

  it('rejects the N+1th message of a pattern with an RpcException payload, even when all are sent at once', async () => {
    const replies = await Promise.all([1, 2, 3, 4].map((n) => send({ cmd: 'sum' }, [n, n])));
    expect(replies.filter((r) => typeof r === 'number')).toHaveLength(3);
    expect(replies.filter((r) => typeof r !== 'number')).toEqual([{ rejected: LIMITED }]);
    expect(await send({ cmd: 'sum' }, [1, 1])).toEqual({ rejected: LIMITED });
  });

  it('keeps one quota per message id (userId first), and the service goes on answering', async () => {
    expect(await send('orders.get', { id: 1 })).toEqual({ order: 1 });
    expect(await send('orders.get', { id: 1 })).toEqual({ rejected: LIMITED });
    expect(await send('orders.get', { id: 2 })).toEqual({ order: 2 });
    expect(await send('orders.get', { id: 1, userId: 'ann' })).toEqual({ order: 1 });
    expect(await send('orders.get', { id: 3, userId: 'ann' })).toEqual({ rejected: LIMITED });
    expect(await send('health', {})).toBe('ok');
  });
});

describe("TCP microservice with contexts: ['http']", () => {
  const redis = new SharedRedis();
  let service: INestMicroservice;
  let client: ClientProxy;

  beforeAll(async () => {
    const port = await freePort();
    const moduleRef = await Test.createTestingModule({
      imports: [await rateLimitModule('memory', redis, { contexts: ['http'] })],
      controllers: [MathController],
    }).compile();
    service = moduleRef.createNestMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port }, logger: false });
    await service.listen();
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
    await client.connect();
  });
  afterAll(async () => {
    await client?.close();
    await service?.close();
  });

  it('leaves messages alone', async () => {
    const replies = await Promise.all([1, 2, 3, 4, 5].map((n) => lastValueFrom(client.send<number>({ cmd: 'sum' }, [n, n]))));
    expect(replies).toEqual([2, 4, 6, 8, 10]);
  });
});

@Controller()
class ReportsController {
  @MessagePattern('reports.build')
  @RateLimitPriority('sheddable')
  @RateLimit('sliding-log', 2, '1m')
  build(@Payload() name: string) {
    return `built:${name}`;
  }

  @MessagePattern('reports.health')
  @RateLimitPriority('critical')
  health() {
    return 'ok';
  }
}

describe('TCP microservice under load shedding', () => {
  let service: INestMicroservice;
  let client: ClientProxy;
  let pressure: ReturnType<typeof pressureSignal>;

  beforeAll(async () => {
    const port = await freePort();
    const moduleRef = await Test.createTestingModule({
      imports: [RateLimitModule.forRoot({ loadShedding: { sampleIntervalMs: 60_000 } })],
      controllers: [ReportsController],
    }).compile();
    service = moduleRef.createNestMicroservice({ transport: Transport.TCP, options: { host: '127.0.0.1', port }, logger: false });
    await service.listen();
    client = ClientProxyFactory.create({ transport: Transport.TCP, options: { host: '127.0.0.1', port } });
    await client.connect();
    pressure = pressureSignal(service);
  });
  afterAll(async () => {
    pressure?.restore();
    await client?.close();
    await service?.close();
  });

  const send = (pattern: string, data: unknown) =>
    lastValueFrom(client.send<unknown>(pattern, data)).catch((error: unknown) => ({ rejected: error }));

  it("answers a 'sheddable' message under pressure with a 503 RpcException payload carrying retryAfter, charging nothing", async () => {
    pressure.press();
    const shed: RateLimitRpcErrorPayload = {
      statusCode: 503,
      message: 'Service Unavailable: this instance is shedding load; retry later.',
      retryAfter: 60,
    };
    expect(await send('reports.build', 'a')).toEqual({ rejected: shed });
    expect(await send('reports.health', {})).toBe('ok');
    pressure.calm();
    // The quota of 2 is whole: the refused message took nothing.
    expect([await send('reports.build', 'b'), await send('reports.build', 'c'), await send('reports.build', 'd')]).toEqual([
      'built:b',
      'built:c',
      { rejected: LIMITED },
    ]);
  });
});
