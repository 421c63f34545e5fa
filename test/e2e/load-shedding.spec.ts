/**
 * Module option `loadShedding` over HTTP on Express and Fastify: while the shedder refuses a class, its calls
 * get 503 with `Retry-After` before any policy is decided (nothing is charged), critical calls pass, and the
 * change is visible as an event, a Prometheus gauge and a field of the terminus indicator. The shedder is
 * moved by a real synchronous block of the event loop, sampled by the test (its own timer runs every minute).
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import type { Server } from 'node:http';
import { Registry } from 'prom-client';
import request from 'supertest';
import { RateLimit, RateLimitEvents, RateLimitModule, RateLimitPriority, type RateLimitModuleOptions } from '../../lib';
import type { RateLimitSheddingEvent } from '../../lib/interfaces/overload.interface';
import { RateLimitLoadShedding } from '../../lib/overload/rate-limit-load-shedding';
import { RateLimitOpenTelemetryModule } from '../../lib/opentelemetry';
import { RateLimitMetrics, RateLimitPrometheusModule } from '../../lib/prometheus';
import { RateLimitHealthIndicator } from '../../lib/terminus';
import { TestTelemetry } from '../support/opentelemetry';
import { ADAPTERS, bootApp, sleep } from './harness';

@Controller()
@RateLimit({ algorithm: 'fixed-window', limit: 5, window: '1h' })
class ShedController {
  @Get('batch')
  @RateLimitPriority('sheddable')
  batch() {
    return 'done';
  }

  @Get('page')
  page() {
    return 'done';
  }

  @Get('checkout')
  @RateLimitPriority('critical')
  checkout() {
    return 'done';
  }
}

function busyWait(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // A synchronous block of the event loop.
  }
}

describe.each(ADAPTERS)('loadShedding on %s', (adapter) => {
  let app: INestApplication;
  let server: Server;
  let shedding: RateLimitLoadShedding;
  const events: RateLimitSheddingEvent[] = [];

  async function boot(options: RateLimitModuleOptions = {}, telemetry?: TestTelemetry): Promise<void> {
    app = await bootApp({
      adapter,
      imports: [
        RateLimitModule.forRoot({ loadShedding: { eventLoopDelayMs: 150, eventLoopUtilization: 1, sampleIntervalMs: 60_000 }, ...options }),
        RateLimitPrometheusModule.forRoot({ registry: new Registry() }),
        TerminusModule,
        ...(telemetry ? [RateLimitOpenTelemetryModule.forRoot({ meterProvider: telemetry.meterProvider })] : []),
      ],
      controllers: [ShedController],
      providers: [RateLimitHealthIndicator],
    });
    server = app.getHttpServer() as Server;
    shedding = app.get(RateLimitLoadShedding);
    events.length = 0;
    app.get(RateLimitEvents).subscribe({ shedding: (e) => events.push(e) });
  }

  afterEach(() => app?.close());

  /** One sample after a 200 ms block: pressure. */
  async function pressure(): Promise<void> {
    await sleep(20);
    busyWait(200);
    await sleep(20);
    shedding.shedder!.sample();
  }

  it("refuses 'sheddable' calls with 503 and Retry-After before any policy is charged; 'default' and 'critical' pass", async () => {
    await boot();
    await pressure();
    expect(shedding.shedder!.level).toBe('sheddable');
    const refused = await request(server).get('/batch');
    expect({ status: refused.status, retryAfter: refused.headers['retry-after'], policy: refused.headers['ratelimit-policy'] }).toEqual({
      status: 503,
      retryAfter: '60',
      policy: undefined,
    });
    expect(refused.body).toEqual({
      statusCode: 503,
      message: 'Service Unavailable: this instance is shedding load; retry later.',
      error: 'Service Unavailable',
      retryAfter: 60,
    });
    for (let i = 0; i < 3; i++) expect((await request(server).get('/batch')).status).toBe(503);
    expect((await request(server).get('/page')).status).toBe(200);
    expect((await request(server).get('/checkout')).status).toBe(200);
    await pressure();
    expect(shedding.shedder!.level).toBe('default');
    expect((await request(server).get('/page')).status).toBe(503);
    expect((await request(server).get('/checkout')).status).toBe(200);
    // Two quiet samples: off again. The refused calls cost nothing: /batch has its whole quota of 5.
    for (let i = 0; i < 2; i++) {
      await sleep(20);
      shedding.shedder!.sample();
    }
    expect(shedding.shedder!.level).toBe('none');
    const first = await request(server).get('/batch');
    expect([first.status, first.headers['ratelimit']]).toEqual([200, expect.stringMatching(/^"default";r=4;t=\d+$/)]);
  });

  it('shows its state: one event per change, the Prometheus gauge and the terminus indicator', async () => {
    await boot();
    const metrics = app.get(RateLimitMetrics);
    const gauge = async () => (await metrics.sheddingLevel!.get()).values[0]?.value ?? 0;
    const health = app.get(RateLimitHealthIndicator);
    expect([await gauge(), (await health.isHealthy('rate-limit'))['rate-limit'].shedding]).toEqual([0, 'none']);
    await pressure();
    await pressure();
    expect(events.map(({ previous, level }) => `${previous}→${level}`)).toEqual(['none→sheddable', 'sheddable→default']);
    expect(events[1].pressure.eventLoopDelayMs).toBeGreaterThan(150);
    const result = (await health.isHealthy('rate-limit'))['rate-limit'];
    expect([await gauge(), result.status, result.shedding]).toEqual([2, 'up', 'default']);
  });

  it('moves the OpenTelemetry level by one per change', async () => {
    const telemetry = new TestTelemetry();
    try {
      await boot({}, telemetry);
      await pressure();
      await pressure();
      expect(await telemetry.points('ratelimit.shedding')).toEqual({ 'ratelimit.shedding.level{}': 2 });
      for (let i = 0; i < 2; i++) {
        await sleep(20);
        shedding.shedder!.sample();
      }
      expect(await telemetry.points('ratelimit.shedding')).toEqual({ 'ratelimit.shedding.level{}': 0 });
    } finally {
      await app.close();
      await telemetry.shutdown();
    }
  });

  it("answers as problem details of type temporary-reduced-capacity with errorFormat: 'problem+json'", async () => {
    await boot({ errorFormat: 'problem+json' });
    await pressure();
    const refused = await request(server).get('/batch');
    expect([refused.status, refused.headers['content-type']]).toEqual([503, 'application/problem+json; charset=utf-8']);
    expect(JSON.parse(refused.text)).toEqual({
      type: 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity',
      title: 'Temporary Reduced Capacity',
      status: 503,
      detail: 'Service Unavailable: this instance is shedding load; retry later.',
      'violated-policies': [],
    });
  });
});
