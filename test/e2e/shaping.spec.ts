import { Controller, Get, Injectable, InternalServerErrorException, Query, type INestApplication } from '@nestjs/common';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { RateLimit, SkipRateLimit } from '../../lib';
import { RateLimitHolds } from '../../lib/http/request-holds';
import { Gate } from '../support/gate';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

/** Records when each shaped request reached its handler. */
@Injectable()
class Arrivals {
  readonly at: number[] = [];
}

@Controller()
class ShapingController {
  constructor(
    private readonly gate: Gate,
    private readonly arrivals: Arrivals,
  ) {}

  @Get('export')
  @RateLimit({ algorithm: 'concurrency', limit: 2, window: '30s' })
  async export(@Query('fail') fail?: string) {
    await this.gate.pass();
    if (fail) throw new InternalServerErrorException('export failed');
    return 'exported';
  }

  @Get('shaped')
  @RateLimit({ algorithm: 'leaky-bucket', limit: 10, window: '1s' })
  shaped() {
    this.arrivals.at.push(performance.now());
    return 'shaped';
  }

  @Get('slow')
  @RateLimit({ algorithm: 'leaky-bucket', limit: 1, window: '1s', burst: 5 })
  slow() {
    return 'slow';
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return 'ok';
  }
}

describe.each(MATRIX)('leases and shaping on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let gate: Gate;
  let base: string;
  afterAll(() => redis.stop());
  /** Boots the app listening on a port, so parallel requests all reach it at once. */
  const boot = async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis)],
      controllers: [ShapingController],
      providers: [Gate, Arrivals],
    });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as AddressInfo).port}`;
    gate = app.get(Gate);
  };
  beforeEach(boot);
  afterEach(async () => {
    gate.release();
    await app.close();
  });

  const send = (path: string) =>
    request(base)
      .get(path)
      .then((res) => res.status);
  /** Waits until `predicate` holds (polling), failing after 2 s. */
  const until = async (predicate: () => boolean) => {
    for (const started = Date.now(); !predicate(); await sleep(5)) {
      if (Date.now() - started > 2_000) throw new Error('condition not reached within 2 s');
    }
  };
  /** Proves both leases are free: two requests get in while the gate is shut, then finish. */
  const bothLeasesFree = async () => {
    gate.close();
    const pending = [send('/export'), send('/export')];
    await until(() => gate.inside === 2);
    gate.release();
    expect(await Promise.all(pending)).toEqual([200, 200]);
  };

  it('admits exactly 2 of 5 parallel requests and gives the leases back after the responses', async () => {
    let answered = 0;
    const pending = Array.from({ length: 5 }, () => send('/export').finally(() => answered++));
    await until(() => gate.inside === 2 && answered === 3);
    gate.release();
    expect((await Promise.all(pending)).sort()).toEqual([200, 200, 429, 429, 429]);
    await bothLeasesFree();
  });

  it('gives the leases back after the handler threw', async () => {
    gate.release();
    expect(await Promise.all([send('/export?fail=1'), send('/export?fail=1')])).toEqual([500, 500]);
    await bothLeasesFree();
  });

  it("holds an aborted request's lease until its handler has settled, then gives it back", async () => {
    const { port } = app.getHttpServer().address() as AddressInfo;
    const aborted = [0, 1].map(() => {
      const req = httpRequest({ host: '127.0.0.1', port, path: '/export' });
      req.on('error', () => undefined);
      req.end();
      return req;
    });
    await until(() => gate.inside === 2);
    expect(await send('/export')).toBe(429);
    for (const req of aborted) req.destroy();
    await sleep(100); // let the server see the sockets close; the two handlers are still inside
    expect(await send('/export')).toBe(429);
    gate.release();
    await until(() => gate.inside === 0);
    expect(await Promise.all([send('/export'), send('/export')])).toEqual([200, 200]);
  });

  it('spaces leaky-bucket requests at the configured rate without blocking other routes', async () => {
    const arrivals = app.get(Arrivals).at;
    const started = performance.now();
    const pending = Array.from({ length: 10 }, () => send('/shaped'));
    await until(() => arrivals.length >= 1);
    expect(await send('/health')).toBe(200);
    // Not queued behind them: answered while the shaped requests are still being spaced out (the last one
    // reaches its handler ~900 ms after the first).
    expect(arrivals.length).toBeLessThan(10);
    expect(await Promise.all(pending)).toEqual(new Array(10).fill(200));
    // The n-th request may not reach its handler before n × 100 ms (20% tolerance). Measured from the first
    // arrival rather than gap by gap: one timer firing late shortens the next gap without exceeding the rate.
    const sorted = [...arrivals].sort((a, b) => a - b);
    const offsets = sorted.map((t) => t - sorted[0]);
    offsets.forEach((offset, n) => expect(offset).toBeGreaterThanOrEqual(0.8 * 100 * n));
    expect(sorted[9] - started).toBeLessThan(900 + 400);
  });

  it('releases held requests on shutdown, leaving no timer behind', async () => {
    const holds = app.get(RateLimitHolds);
    const pending = Array.from({ length: 5 }, () => send('/slow'));
    await until(() => holds.size === 4);
    const closing = performance.now();
    await app.close();
    expect(performance.now() - closing).toBeLessThan(1_000);
    expect(holds.size).toBe(0);
    expect(await Promise.all(pending)).toEqual([200, 200, 200, 200, 200]);
    await boot();
  });
});
