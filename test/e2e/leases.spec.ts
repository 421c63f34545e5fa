import { Controller, Get, Headers, Injectable, type INestApplication } from '@nestjs/common';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RateLimit } from '../../lib';
import { RATE_LIMIT_STORE } from '../../lib/rate-limit.module-definition';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { Gate } from '../support/gate';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

const LIMIT = 5;
const HANDLER_MS = 200;
/** The probe: 1,000 requests at 10 per 20 ms, one in five aborted by its client after 5 ms. */
const BATCHES = 100;
/** A lease window shorter than the work: the heartbeat keeps the lease held, renewing it every 100 ms. */
const LEASE_MS = 300;
const LONG_MS = 900;

/** Counts the `/work` handlers running at once. */
@Injectable()
class Inside {
  running = 0;
  max = 0;
  /** Handlers that ran for a request whose client had gone after 5 ms. */
  abandoned = 0;
  admitted = 0;
  /** When the running `/long` handler started (performance.now()), or undefined. */
  longSince: number | undefined;
}

@Controller()
class LeasesController {
  constructor(
    private readonly inside: Inside,
    private readonly gate: Gate,
  ) {}

  @Get('gated')
  @RateLimit({ algorithm: 'concurrency', limit: 2, window: '30s' })
  async gated() {
    await this.gate.pass();
    return 'done';
  }

  /** Works `x-ms` ms (default 900), past its 300 ms lease window. */
  @Get('long')
  @RateLimit({ algorithm: 'concurrency', limit: 1, window: LEASE_MS, name: 'long' })
  async long(@Headers('x-ms') ms?: string) {
    this.inside.longSince = performance.now();
    try {
      await sleep(ms === undefined ? LONG_MS : Number(ms));
    } finally {
      this.inside.longSince = undefined;
    }
    return 'done';
  }

  @Get('work')
  @RateLimit({ algorithm: 'concurrency', limit: LIMIT, window: '30s' })
  async work(@Headers('x-abort') abort?: string) {
    const inside = this.inside;
    inside.admitted++;
    if (abort) inside.abandoned++;
    inside.max = Math.max(inside.max, ++inside.running);
    try {
      await sleep(HANDLER_MS);
    } finally {
      inside.running--;
    }
    return 'done';
  }
}

describe.each(MATRIX)('concurrency leases under client aborts on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let port: number;
  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis)],
      controllers: [LeasesController],
      providers: [Inside, Gate],
    });
    await app.listen(0, '127.0.0.1');
    port = (app.getHttpServer().address() as AddressInfo).port;
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  /** One request on its own connection that the client may abandon (`abort`); its status, or 0 when aborted. */
  const open = (path: string, abandons: boolean, headers: Record<string, string> = {}) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false, headers: abandons ? { ...headers, 'x-abort': '1' } : headers });
    const status = new Promise<number>((resolve) => {
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', () => resolve(0));
    });
    req.end();
    return { status, abort: () => req.destroy() };
  };

  /** One request; `abortAfterMs` destroys it that long after it was sent. */
  const send = (abortAfterMs?: number, path = '/work', headers?: Record<string, string>) => {
    const request = open(path, abortAfterMs !== undefined, headers);
    if (abortAfterMs !== undefined) setTimeout(request.abort, abortAfterMs);
    return request.status;
  };

  /** Waits until `predicate` holds (polling), failing after 2 s. */
  const until = async (predicate: () => boolean) => {
    for (const started = Date.now(); !predicate(); await sleep(5)) {
      if (Date.now() - started > 2_000) throw new Error('condition not reached within 2 s');
    }
  };

  it('keeps the leases of aborted requests until their handlers settle, then gives them back', async () => {
    const gate = app.get(Gate);
    const clients = [0, 1].map(() => {
      const req = httpRequest({ host: '127.0.0.1', port, path: '/gated', agent: false });
      req.on('error', () => undefined);
      req.end();
      return req;
    });
    await until(() => gate.inside === 2);
    expect(await send(undefined, '/gated')).toBe(429);
    // Both clients go away while their handlers are still inside: the leases stay held.
    for (const req of clients) req.destroy();
    await sleep(100); // the server has seen the sockets close
    expect(await Promise.race([send(undefined, '/gated'), sleep(1_000).then(() => 'admitted')])).toBe(429);
    expect(gate.inside).toBe(2);
    gate.release();
    await until(() => gate.inside === 0);
    await sleep(50); // the releases reach the store
    expect(await Promise.all([send(undefined, '/gated'), send(undefined, '/gated')])).toEqual([200, 200]);
  });

  it(`never runs more than ${LIMIT} handlers at once, however many clients abort`, async () => {
    const inside = app.get(Inside);
    const pending: Array<Promise<number>> = [];
    // First five clients take every lease and go away once their handlers run (so at least five handlers
    // outlive their clients, however slow the machine).
    const first = Array.from({ length: LIMIT }, () => open('/work', true));
    await until(() => inside.admitted === LIMIT);
    for (const request of first) {
      request.abort();
      pending.push(request.status);
    }
    // Then 1,000 more over ~2 s, one in five aborting after 5 ms.
    const started = performance.now();
    for (let batch = 0; batch < BATCHES; batch++) {
      await sleep(20);
      for (let i = 0; i < 10; i++) pending.push(send(i % 5 === 0 ? 5 : undefined));
    }
    const statuses = await Promise.all(pending);
    for (const started = Date.now(); inside.running > 0 && Date.now() - started < 2_000;) await sleep(10);
    const count = (status: number) => statuses.filter((s) => s === status).length;
    console.log(
      `${adapter}/${store}: ${pending.length} requests (${LIMIT} abandoned once admitted, ${BATCHES * 2} aborted after 5 ms) in ` +
        `${Math.round(performance.now() - started)} ms: at most ${inside.max} handlers at once; ` +
        `${inside.admitted} admitted (${inside.abandoned} of them abandoned by their client), ${count(200)} × 200, ${count(429)} × 429`,
    );
    expect(pending.length).toBe(LIMIT + BATCHES * 10);
    expect(inside.abandoned).toBeGreaterThanOrEqual(LIMIT);
    expect(inside.max).toBeLessThanOrEqual(LIMIT);
    expect(inside.running).toBe(0);
    // And no lease leaked: all five are free again.
    expect(await Promise.all(Array.from({ length: LIMIT }, () => send()))).toEqual(new Array(LIMIT).fill(200));
  }, 30_000);

  it(`a handler working ${LONG_MS} ms keeps its ${LEASE_MS} ms lease the whole time (renewed while it runs, never after), and frees it as it ends`, async () => {
    const inside = app.get(Inside);
    const decide = jest.spyOn(app.get<RateLimitStore>(RATE_LIMIT_STORE), 'decide');
    // Renewals are the store calls of a negative cost (the lease's units); the guard's own decisions are positive.
    const renewals = () => decide.mock.calls.filter(([calls]) => calls[0].cost < 0).length;
    const long = send(undefined, '/long');
    await until(() => inside.longSince !== undefined);
    const since = inside.longSince!;
    const probes: Array<{ at: number; status: number }> = [];
    for (const at of [100, 400, 700]) {
      await sleep(since + at - performance.now());
      const sentAt = Math.round(performance.now() - since);
      probes.push({ at: sentAt, status: await send(undefined, '/long', { 'x-ms': '0' }) });
    }
    expect(await long).toBe(200);
    const endedAt = performance.now();
    // The slot is free as soon as the work is over: well before the lease, last renewed within the last 100 ms, would expire.
    let freedAfter = Infinity;
    while (performance.now() - endedAt < 1_000) {
      if ((await send(undefined, '/long', { 'x-ms': '0' })) === 200) {
        freedAfter = performance.now() - endedAt;
        break;
      }
    }
    const atEnd = renewals();
    await sleep(2 * LEASE_MS);
    console.log(
      `${adapter}/${store}: 429 for the probes sent ${probes.map((p) => p.at).join(', ')} ms into the ${LONG_MS} ms handler ` +
        `(lease window ${LEASE_MS} ms); ${atEnd} renewals; slot free ${Math.round(freedAfter)} ms after the response`,
    );
    expect(probes.map((p) => p.status)).toEqual([429, 429, 429]);
    expect(probes[2].at).toBeGreaterThanOrEqual(2 * LEASE_MS);
    expect(freedAfter).toBeLessThan(150);
    // One renewal per third of the window while the handler ran: 9 at most, none since.
    expect(atEnd).toBeGreaterThanOrEqual(4);
    expect(atEnd).toBeLessThanOrEqual(LONG_MS / (LEASE_MS / 3));
    expect(renewals()).toBe(atEnd);
    decide.mockRestore();
  });
});
