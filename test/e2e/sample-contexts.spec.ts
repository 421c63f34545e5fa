import type { INestApplication } from '@nestjs/common';
import type { AddressInfo } from 'node:net';
import { io, type Socket } from 'socket.io-client';
import request from 'supertest';
import { AppModule } from '../../sample/app.module';
import { ADAPTERS, bootApp } from './harness';

/** The sample's GraphQL resolver and socket.io gateway answer as their comments say (memory store). */
describe.each(ADAPTERS)('sample resolver and gateway on %s', (adapter) => {
  let app: INestApplication;
  let socket: Socket | undefined;
  const previous = process.env.REDIS_URL;

  beforeAll(async () => {
    delete process.env.REDIS_URL;
    app = await bootApp({ adapter, imports: [AppModule] });
    await app.listen(0, '127.0.0.1');
  });
  afterAll(async () => {
    socket?.disconnect();
    await app?.close();
    if (previous !== undefined) process.env.REDIS_URL = previous;
  });

  const gql = (query: string) => request(app.getHttpServer()).post('/graphql').send({ query });

  it('limits { quote } to 5 a minute; other fields fall under the defaultPolicy', async () => {
    const quotes = [];
    for (let i = 0; i < 6; i++) quotes.push((await gql('{ quote }')).body);
    expect(quotes.slice(0, 5)).toEqual(new Array(5).fill({ data: { quote: 'Simplicity is prerequisite for reliability.' } }));
    expect(quotes[5].data).toEqual({ quote: null });
    expect(quotes[5].errors).toHaveLength(1);
    expect(quotes[5].errors[0].message).toBe('Too Many Requests');
    expect(quotes[5].errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: expect.any(Number) });
    expect(quotes[5].errors[0].extensions.retryAfter).toBeGreaterThanOrEqual(1);
    const author = await gql('{ author }');
    expect(author.body).toEqual({ data: { author: 'Edsger W. Dijkstra' } });
    // The sample keeps Apollo's default context, which on Fastify holds no reply to write headers on.
    expect(author.headers['ratelimit-policy']).toBe(adapter === 'express' ? '"default";q=60;w=60' : undefined);
  });

  it("answers 3 chat messages at once, then an 'exception' event", async () => {
    const { port } = app.getHttpServer().address() as AddressInfo;
    socket = io(`http://127.0.0.1:${port}`, { transports: ['websocket'], forceNew: true, reconnection: false });
    const exceptions: unknown[] = [];
    socket.on('exception', (payload: unknown) => exceptions.push(payload));
    // Answered messages may take a while on a busy machine; the rejected one's short wait only bounds the test.
    const send = (text: string, waitMs = 10_000) =>
      socket!
        .timeout(waitMs)
        .emitWithAck('chat', text)
        .catch(() => 'no ack');
    expect([await send('a'), await send('b'), await send('c'), await send('d', 300)]).toEqual(['echo: a', 'echo: b', 'echo: c', 'no ack']);
    expect(exceptions).toEqual([{ status: 'error', statusCode: 429, message: 'Too Many Requests', retryAfter: 2 }]);
    expect(socket.connected).toBe(true);
  });
});
