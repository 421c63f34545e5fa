/**
 * Adaptive limits in what the module reports, as store policies are: one decision event per admission (and
 * `nearLimit`), the Prometheus and OpenTelemetry decision counters, and gauges of each limit's value and of
 * the calls it has in flight, per policy and route. Calls are held in flight at a gate; no window completes
 * (fewer than 10 calls end per limit), so each limit stays at its initial value.
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import type { Server } from 'node:http';
import { Registry } from 'prom-client';
import request from 'supertest';
import {
  RateLimit,
  RateLimiterService,
  RateLimitEvents,
  RateLimitModule,
  type RateLimitDecision,
  type RateLimitDecisionEvent,
} from '../../lib';
import { RateLimitOpenTelemetryModule } from '../../lib/opentelemetry';
import { RateLimitMetrics, RateLimitPrometheusModule } from '../../lib/prometheus';
import { Gate } from '../support/gate';
import { TestTelemetry } from '../support/opentelemetry';
import { ADAPTERS, bootApp, sleep } from './harness';

@Controller()
class ReportsController {
  constructor(private readonly gate: Gate) {}

  @Get('report')
  @RateLimit({ algorithm: 'adaptive', name: 'capacity', limit: 50, adaptive: { initial: 3 } })
  async report() {
    await this.gate.pass();
    return 'done';
  }

  @Get('export')
  @RateLimit({ algorithm: 'adaptive', limit: 10, adaptive: { strategy: 'aimd', initial: 4, min: 1 } })
  export() {
    return 'done';
  }
}

/** An adaptive decision as the limit states it: no reset, no `t`. */
function adaptive(policy: string, limit: number, remaining: number, allowed = true): RateLimitDecision {
  return { allowed, policy, limit, remaining, resetMs: 0, moreQuotaMs: 0, retryAfterMs: allowed ? 0 : 1 };
}

describe.each(ADAPTERS)('adaptive limits in events and metrics on %s', (adapter) => {
  let app: INestApplication;
  let server: Server;
  let gate: Gate;
  let telemetry: TestTelemetry;
  let metrics: RateLimitMetrics;
  const events: RateLimitDecisionEvent[] = [];
  const nearLimit: RateLimitDecision[] = [];

  beforeEach(async () => {
    telemetry = new TestTelemetry();
    app = await bootApp({
      adapter,
      imports: [
        RateLimitModule.forRoot({ nearLimitRatio: 0.5 }),
        RateLimitPrometheusModule.forRoot({ registry: new Registry() }),
        RateLimitOpenTelemetryModule.forRoot({ meterProvider: telemetry.meterProvider }),
      ],
      controllers: [ReportsController],
      providers: [Gate],
    });
    server = app.getHttpServer() as Server;
    gate = app.get(Gate);
    metrics = app.get(RateLimitMetrics);
    events.length = 0;
    nearLimit.length = 0;
    app.get(RateLimitEvents).subscribe({ decision: (e) => events.push(e), nearLimit: (d) => nearLimit.push(d) });
  });
  afterEach(async () => {
    gate?.release();
    await app?.close();
    await telemetry?.shutdown();
  });

  /** A Prometheus gauge's values as `{ 'policy route': value }`. */
  async function gauge(name: 'adaptiveLimit' | 'adaptiveInflight'): Promise<Record<string, number>> {
    const values = (await metrics[name].get()).values;
    return Object.fromEntries(values.map((v) => [`${v.labels.policy} ${v.labels.route}`, v.value]));
  }

  /** Every Prometheus decision counter, as `{ 'allowed|rejected policy reason': value }`. */
  async function counted(): Promise<Record<string, number>> {
    const found: Record<string, number> = {};
    for (const kind of ['allowed', 'rejected'] as const) {
      for (const v of (await metrics[kind].get()).values) found[`${kind} ${v.labels.policy} ${v.labels.reason}`] = v.value;
    }
    return found;
  }

  it("tells each admission as a decision, counts it, and gauges each route's limit and calls in flight", async () => {
    const held = Array.from({ length: 3 }, () =>
      request(server)
        .get('/report')
        .then((r) => r),
    );
    while (gate.inside < 3) await sleep(5);
    expect((await request(server).get('/report')).status).toBe(503);

    expect(events.map(({ allowed, decisions }) => ({ allowed, decisions }))).toEqual([
      { allowed: true, decisions: [adaptive('capacity', 3, 2)] },
      { allowed: true, decisions: [adaptive('capacity', 3, 1)] },
      { allowed: true, decisions: [adaptive('capacity', 3, 0)] },
      { allowed: false, decisions: [adaptive('capacity', 3, 0, false)] },
    ]);
    for (const { durationMs } of events) expect(durationMs).toBeGreaterThanOrEqual(0);
    // nearLimitRatio 0.5 of 3: at most one left.
    expect(nearLimit).toEqual([adaptive('capacity', 3, 1), adaptive('capacity', 3, 0)]);
    expect(await counted()).toEqual({ 'allowed capacity counter': 3, 'rejected capacity counter': 1 });
    expect(await telemetry.points('ratelimit.decisions')).toEqual({
      'ratelimit.decisions{ratelimit.outcome=allowed,ratelimit.policy=capacity}': 3,
      'ratelimit.decisions{ratelimit.outcome=rejected,ratelimit.policy=capacity}': 1,
    });

    const limits = { 'capacity ReportsController.report': 3, 'adaptive ReportsController.export': 4 };
    expect([await gauge('adaptiveLimit'), await gauge('adaptiveInflight')]).toEqual([
      limits,
      { 'capacity ReportsController.report': 3, 'adaptive ReportsController.export': 0 },
    ]);
    const attributes = (policy: string, route: string) => `{ratelimit.policy=${policy},ratelimit.route=${route}}`;
    expect(await telemetry.points('ratelimit.adaptive')).toEqual({
      [`ratelimit.adaptive.limit${attributes('capacity', 'ReportsController.report')}`]: 3,
      [`ratelimit.adaptive.limit${attributes('adaptive', 'ReportsController.export')}`]: 4,
      [`ratelimit.adaptive.inflight${attributes('capacity', 'ReportsController.report')}`]: 3,
      [`ratelimit.adaptive.inflight${attributes('adaptive', 'ReportsController.export')}`]: 0,
    });

    gate.release();
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200, 200]);
    expect([await gauge('adaptiveLimit'), await gauge('adaptiveInflight')]).toEqual([
      limits,
      { 'capacity ReportsController.report': 0, 'adaptive ReportsController.export': 0 },
    ]);
  });

  it("does the same for RateLimiterService.admit's limits, under the route 'RateLimiterService.admit'", async () => {
    const limiter = app.get(RateLimiterService);
    const policy = { algorithm: 'adaptive', name: 'pdf', limit: 8, adaptive: { initial: 2 } } as const;
    const admissions = [limiter.admit(policy), limiter.admit(policy), limiter.admit(policy)];
    expect(admissions.map((a) => a.decision.allowed)).toEqual([true, true, false]);
    expect(events.map(({ allowed, decisions }) => ({ allowed, decisions }))).toEqual([
      { allowed: true, decisions: [adaptive('pdf', 2, 1)] },
      { allowed: true, decisions: [adaptive('pdf', 2, 0)] },
      { allowed: false, decisions: [adaptive('pdf', 2, 0, false)] },
    ]);
    expect(nearLimit).toEqual([adaptive('pdf', 2, 1), adaptive('pdf', 2, 0)]);
    expect(await counted()).toEqual({ 'allowed pdf counter': 2, 'rejected pdf counter': 1 });
    expect(await gauge('adaptiveInflight')).toEqual({
      'capacity ReportsController.report': 0,
      'adaptive ReportsController.export': 0,
      'pdf RateLimiterService.admit': 2,
    });
    for (const admission of admissions) admission.release();
    expect((await gauge('adaptiveInflight'))['pdf RateLimiterService.admit']).toBe(0);
  });
});
