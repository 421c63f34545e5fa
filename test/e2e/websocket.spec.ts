import type { INestApplication } from '@nestjs/common';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import type { AddressInfo } from 'node:net';
import { io, type Socket } from 'socket.io-client';
import { RateLimit, RateLimitModule, RateLimitPriority, type RateLimitWsErrorPayload } from '../../lib';
import { pressureSignal } from '../support/pressure';
import { bootApp, rateLimitModule, SharedRedis } from './harness';

@WebSocketGateway()
class ChatGateway {
  @SubscribeMessage('chat')
  @RateLimit('sliding-log', 2, '1m')
  chat(@MessageBody() text: string) {
    return `echo:${text}`;
  }

  @SubscribeMessage('ping')
  ping() {
    return 'pong';
  }

  /** One vote per voter named in the message, whatever the connection. */
  @SubscribeMessage('vote')
  @RateLimit('sliding-log', 1, '1m', { name: 'votes', by: (context) => `voter:${context.switchToWs().getData<{ voter: string }>().voter}` })
  vote(@MessageBody() { voter }: { voter: string }) {
    return `voted:${voter}`;
  }
}

const LIMITED: RateLimitWsErrorPayload = { status: 'error', statusCode: 429, message: 'Too Many Requests', retryAfter: 60 };

/** A socket.io client that records every `exception` event it receives. */
async function connect(url: string): Promise<{ socket: Socket; exceptions: unknown[] }> {
  const socket = io(url, { transports: ['websocket'], forceNew: true, reconnection: false });
  const exceptions: unknown[] = [];
  socket.on('exception', (payload: unknown) => exceptions.push(payload));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('connect_error', reject);
  });
  return { socket, exceptions };
}

/**
 * Emits a message and waits for its acknowledgement; `'no ack'` when none came within `waitMs` (a rejected
 * message gets none). A message expected to be answered waits long (a busy machine may take a while); one
 * expected to be rejected passes a short wait, which only bounds the test's time.
 */
async function send(socket: Socket, event: string, data: unknown, waitMs = 10_000): Promise<unknown> {
  try {
    return await socket.timeout(waitMs).emitWithAck(event, data);
  } catch {
    return 'no ack';
  }
}

describe('WebSocket gateway (socket.io) with the memory store', () => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let url: string;
  const sockets: Socket[] = [];
  const client = async () => {
    const connected = await connect(url);
    sockets.push(connected.socket);
    return connected;
  };

  beforeAll(async () => {
    app = await bootApp({ adapter: 'express', imports: [await rateLimitModule('memory', redis)], providers: [ChatGateway] });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.disconnect();
    await app?.close();
  });

  it("answers the message past the limit with an 'exception' event, keeps the connection, and shares the quota by handshake address", async () => {
    const { socket, exceptions } = await client();
    expect(await send(socket, 'chat', 'a')).toBe('echo:a');
    expect(await send(socket, 'chat', 'b')).toBe('echo:b');
    expect(await send(socket, 'chat', 'c', 300)).toBe('no ack');
    expect(exceptions).toEqual([LIMITED]);
    expect(socket.connected).toBe(true);
    expect(await send(socket, 'ping', null)).toBe('pong');

    // A second connection from the same address draws from the same quota.
    const other = await client();
    expect(await send(other.socket, 'chat', 'd', 300)).toBe('no ack');
    expect(other.exceptions).toEqual([LIMITED]);
  });

  it('survives a burst of rejected messages: every one is answered, none crashes the server', async () => {
    // The chat quota of this address (127.0.0.1) was spent above, so every one of these is rejected.
    const { socket, exceptions } = await client();
    for (let i = 0; i < 50; i++) socket.emit('chat', `spam ${i}`);
    expect(await send(socket, 'ping', null)).toBe('pong');
    expect(exceptions).toHaveLength(50);
    // The quota was spent by the test above, some time ago on a busy machine: Retry-After counts down from 60 s.
    for (const exception of exceptions) expect(exception).toEqual({ ...LIMITED, retryAfter: expect.any(Number) });
    const waits = exceptions.map((e) => (e as RateLimitWsErrorPayload).retryAfter!);
    expect(waits.every((wait, i) => Number.isInteger(wait) && wait >= 1 && wait <= 60 && (i === 0 || wait <= waits[i - 1]))).toBe(true);
    expect(socket.connected).toBe(true);
    const fresh = await client();
    expect(await send(fresh.socket, 'ping', null)).toBe('pong');
  });

  it('tracks by a function of the message (the ExecutionContext) when the policy says so', async () => {
    const { socket, exceptions } = await client();
    expect(await send(socket, 'vote', { voter: 'ann' })).toBe('voted:ann');
    expect(await send(socket, 'vote', { voter: 'ann' }, 300)).toBe('no ack');
    expect(await send(socket, 'vote', { voter: 'bob' })).toBe('voted:bob');
    expect(exceptions).toEqual([LIMITED]);
  });
});

@WebSocketGateway()
class ExportGateway {
  @SubscribeMessage('export')
  @RateLimitPriority('sheddable')
  @RateLimit('sliding-log', 5, '1m')
  export(@MessageBody() name: string) {
    return `exported:${name}`;
  }

  /** An adaptive limit of one: messages have no end signal, so it never holds them. */
  @SubscribeMessage('render')
  @RateLimit({ algorithm: 'adaptive', limit: 10, adaptive: { initial: 1 } })
  render(@MessageBody() name: string) {
    return `rendered:${name}`;
  }

  @SubscribeMessage('ping')
  @RateLimitPriority('critical')
  ping() {
    return 'pong';
  }
}

describe('WebSocket gateway (socket.io) under load shedding', () => {
  let app: INestApplication;
  let url: string;
  let pressure: ReturnType<typeof pressureSignal>;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    app = await bootApp({
      adapter: 'express',
      imports: [RateLimitModule.forRoot({ loadShedding: { sampleIntervalMs: 60_000 } })],
      providers: [ExportGateway],
    });
    await app.listen(0, '127.0.0.1');
    url = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    pressure = pressureSignal(app);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.disconnect();
    pressure?.restore();
    await app?.close();
  });

  it("answers a 'sheddable' message under pressure with a 503 'exception' event carrying retryAfter, and charges nothing", async () => {
    const { socket, exceptions } = await connect(url);
    sockets.push(socket);
    pressure.press();
    expect(await send(socket, 'export', 'a', 300)).toBe('no ack');
    expect(await send(socket, 'ping', null)).toBe('pong');
    const shed: RateLimitWsErrorPayload = {
      status: 'error',
      statusCode: 503,
      message: 'Service Unavailable: this instance is shedding load; retry later.',
      retryAfter: 60,
    };
    expect(exceptions).toEqual([shed]);
    expect(socket.connected).toBe(true);
    pressure.calm();
    // Five more pass: the refused message took nothing from the quota of 5.
    for (const name of ['b', 'c', 'd', 'e', 'f']) expect(await send(socket, 'export', name)).toBe(`exported:${name}`);
    expect(await send(socket, 'export', 'g', 300)).toBe('no ack');
    expect(exceptions).toEqual([shed, LIMITED]);
  });

  it('lets messages past an adaptive limit: nothing would tell it when they end', async () => {
    const { socket, exceptions } = await connect(url);
    sockets.push(socket);
    const replies = await Promise.all(['a', 'b', 'c'].map((name) => send(socket, 'render', name)));
    expect([replies, exceptions]).toEqual([['rendered:a', 'rendered:b', 'rendered:c'], []]);
  });
});
