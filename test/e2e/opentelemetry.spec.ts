import { Controller, Get, Injectable, type INestApplication } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import request from 'supertest';
import {
  RateLimit,
  RateLimitEvents,
  RateLimiterService,
  RateLimitModule,
  type RateLimitDecision,
  type RateLimitModuleOptions,
} from '../../lib';
import { RateLimitOpenTelemetryModule, type RateLimitOpenTelemetryOptions } from '../../lib/opentelemetry';
import { enableContext, TestTelemetry, traceRequests } from '../support/opentelemetry';
import { ADAPTERS, bootApp, MATRIX, rateLimitModule, redisPerTest, SharedRedis, type AdapterName } from './harness';

@Controller()
class OtelController {
  @Get('limited')
  @RateLimit({ name: 'burst', algorithm: 'fixed-window', limit: 5, window: '1h' })
  limited() {
    return 'limited';
  }

  /** 'current' enforces 5 per hour while 'next' (1 per hour) only reports. */
  @Get('shadowed')
  @RateLimit([
    { name: 'current', algorithm: 'fixed-window', limit: 5, window: '1h' },
    { name: 'next', algorithm: 'fixed-window', limit: 1, window: '1h', mode: 'shadow' },
  ])
  shadowed() {
    return 'shadowed';
  }

  /** One policy per store-error mode. */
  @Get('fallbacks')
  @RateLimit([
    { name: 'open', algorithm: 'fixed-window', limit: 5, window: '1h', onStoreError: 'fail-open' },
    { name: 'insured', algorithm: 'fixed-window', limit: 5, window: '1h', onStoreError: 'insurance' },
    { name: 'closed', algorithm: 'fixed-window', limit: 5, window: '1h', onStoreError: 'fail-closed' },
  ])
  fallbacks() {
    return 'fallbacks';
  }
}

/** What the module's own bus saw, to compare the OpenTelemetry data with. */
@Injectable()
class Recorder {
  readonly decisions: RateLimitDecision[][] = [];
  readonly errors: Error[] = [];

  constructor(events: RateLimitEvents) {
    events.subscribe({ decision: (e) => this.decisions.push(e.decisions), storeError: (error) => this.errors.push(error) });
  }
}

const DEFAULT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];
const P = 'ratelimit.policy';
const O = 'ratelimit.outcome';

let disableContext: () => void;
beforeAll(() => (disableContext = enableContext()));
afterAll(() => disableContext());

/** An app with the OpenTelemetry module on `telemetry`'s providers, each request in a span of its own. */
async function bootTraced(
  adapter: AdapterName,
  telemetry: TestTelemetry,
  rateLimit: Awaited<ReturnType<typeof rateLimitModule>>,
  options: RateLimitOpenTelemetryOptions = { meterProvider: telemetry.meterProvider },
): Promise<INestApplication> {
  const app = await bootApp({
    adapter,
    imports: [rateLimit, RateLimitOpenTelemetryModule.forRoot(options)],
    controllers: [OtelController],
    providers: [Recorder],
  });
  traceRequests(app, telemetry.tracer);
  return app;
}

async function statuses(app: INestApplication, paths: string[]): Promise<number[]> {
  const result = [];
  for (const path of paths) result.push((await request(app.getHttpServer()).get(path)).status);
  return result;
}

describe.each(MATRIX)('OpenTelemetry on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let telemetry: TestTelemetry;
  let app: INestApplication;
  beforeEach(async () => {
    telemetry = new TestTelemetry();
    app = await bootTraced(adapter, telemetry, await rateLimitModule(store, redis, { nearLimitRatio: 0.4 }));
  });
  afterEach(async () => {
    await app.close();
    await telemetry.shutdown();
  });
  afterAll(() => redis.stop());

  it('counts every policy decision by outcome, near-limit decisions, and one duration per request', async () => {
    const sequence = ['/limited', '/limited', '/limited', '/limited', '/limited', '/limited', '/shadowed', '/shadowed'];
    expect(await statuses(app, sequence)).toEqual([200, 200, 200, 200, 200, 429, 200, 200]);

    expect(await telemetry.points('ratelimit.')).toEqual({
      [`ratelimit.decisions{${O}=allowed,${P}=burst}`]: 5,
      [`ratelimit.decisions{${O}=rejected,${P}=burst}`]: 1,
      [`ratelimit.decisions{${O}=allowed,${P}=current}`]: 2,
      [`ratelimit.decisions{${O}=allowed,${P}=next}`]: 1,
      [`ratelimit.decisions{${O}=shadow-rejected,${P}=next}`]: 1,
      // floor(0.4 × 5) = 2: 'burst' with 2, 1 and 0 left; 'next' with 0 left (its 1 of 1 taken).
      [`ratelimit.near_limit{${P}=burst}`]: 3,
      [`ratelimit.near_limit{${P}=next}`]: 1,
      [`ratelimit.decision.duration{${O}=allowed}`]: 6,
      [`ratelimit.decision.duration{${O}=rejected}`]: 1,
      [`ratelimit.decision.duration{${O}=shadow-rejected}`]: 1,
    });
    const duration = (await telemetry.metrics()).get('ratelimit.decision.duration')!;
    expect(duration.descriptor.unit).toBe('s');
    expect((duration.dataPoints[0].value as { buckets: { boundaries: number[] } }).buckets.boundaries).toEqual(DEFAULT_BUCKETS);
    expect((await telemetry.metrics()).get('ratelimit.decisions')!.descriptor.unit).toBe('{decision}');
  });

  it("writes the deciding policy on the request's span, with an event per rejection and per near-limit policy", async () => {
    const sequence = ['/limited', '/limited', '/limited', '/limited', '/limited', '/limited', '/shadowed', '/shadowed'];
    const responses = [];
    for (const path of sequence) responses.push(await request(app.getHttpServer()).get(path));
    const spans = await telemetry.spans(sequence.length);
    expect(spans.map((s) => s.name)).toEqual(sequence.map((path) => `GET ${path}`));

    const seen = app.get(Recorder).decisions;
    const burstRetry = seen[5][0].retryAfterMs;
    const nextRetry = seen[7][1].retryAfterMs;
    // The wait the store computed, as the response states it.
    expect(burstRetry).toBeGreaterThan(0);
    expect(burstRetry).toBeLessThanOrEqual(3_600_000);
    expect(responses[5].headers['retry-after']).toBe(String(Math.ceil(burstRetry / 1000)));
    expect(nextRetry).toBeGreaterThan(0);

    const policy = (name: string, outcome: string, limit: number, remaining: number, retry = 0) => ({
      [P]: name,
      [O]: outcome,
      'ratelimit.limit': limit,
      'ratelimit.remaining': remaining,
      'ratelimit.retry_after_ms': retry,
    });
    const near = (name: string, limit: number, remaining: number) => ({
      name: 'ratelimit.near_limit',
      attributes: { [P]: name, 'ratelimit.limit': limit, 'ratelimit.remaining': remaining },
    });
    expect(spans.map(({ attributes, events }) => ({ attributes, events }))).toEqual([
      { attributes: policy('burst', 'allowed', 5, 4), events: [] },
      { attributes: policy('burst', 'allowed', 5, 3), events: [] },
      { attributes: policy('burst', 'allowed', 5, 2), events: [near('burst', 5, 2)] },
      { attributes: policy('burst', 'allowed', 5, 1), events: [near('burst', 5, 1)] },
      { attributes: policy('burst', 'allowed', 5, 0), events: [near('burst', 5, 0)] },
      {
        attributes: policy('burst', 'rejected', 5, 0, burstRetry),
        events: [{ name: 'ratelimit.rejected', attributes: policy('burst', 'rejected', 5, 0, burstRetry) }],
      },
      // Allowed: the policy with the fewest units left decides what the span shows.
      { attributes: policy('next', 'allowed', 1, 0), events: [near('next', 1, 0)] },
      {
        attributes: { ...policy('next', 'shadow-rejected', 1, 0, nextRetry), 'ratelimit.reason': 'shadow' },
        events: [
          {
            name: 'ratelimit.rejected',
            attributes: { ...policy('next', 'shadow-rejected', 1, 0, nextRetry), 'ratelimit.reason': 'shadow' },
          },
        ],
      },
    ]);
  });
});

describe.each(ADAPTERS)('OpenTelemetry on %s when the Redis store is down', (adapter) => {
  const redis = redisPerTest();
  let telemetry: TestTelemetry;
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await telemetry.shutdown();
  });

  const bootAndStopRedis = async (options: RateLimitModuleOptions = {}) => {
    telemetry = new TestTelemetry();
    app = await bootTraced(adapter, telemetry, RateLimitModule.forRoot({ redis: redis.client, storeTimeoutMs: 50, ...options }));
    await redis.server.stop();
    return app;
  };

  it('counts a fail-open decision and the store error, and marks the span fail-open', async () => {
    const app = await bootAndStopRedis({ onStoreError: 'fail-open' });
    expect(await statuses(app, ['/limited'])).toEqual([200]);

    const [error] = app.get(Recorder).errors;
    expect(app.get(Recorder).errors).toHaveLength(1);
    expect(await telemetry.points('ratelimit.')).toEqual({
      [`ratelimit.decisions{${O}=fail-open,${P}=burst}`]: 1,
      [`ratelimit.decision.duration{${O}=fail-open}`]: 1,
      [`ratelimit.store.errors{error.type=${error.name}}`]: 1,
    });
    // fail-open reports the full quota; it is never near the limit.
    const [span] = await telemetry.spans(1);
    expect(span.attributes).toEqual({
      [P]: 'burst',
      [O]: 'fail-open',
      'ratelimit.limit': 5,
      'ratelimit.remaining': 5,
      'ratelimit.retry_after_ms': 0,
      'ratelimit.reason': 'store-unavailable',
    });
    expect(span.events).toEqual([]);
  });

  it('tells fail-open, insurance and fail-closed policies apart; the request is fail-closed', async () => {
    const app = await bootAndStopRedis();
    expect(await statuses(app, ['/fallbacks'])).toEqual([503]);

    const [error] = app.get(Recorder).errors;
    expect(await telemetry.points('ratelimit.')).toEqual({
      [`ratelimit.decisions{${O}=fail-open,${P}=open}`]: 1,
      [`ratelimit.decisions{${O}=insurance-allowed,${P}=insured}`]: 1,
      [`ratelimit.decisions{${O}=fail-closed,${P}=closed}`]: 1,
      [`ratelimit.decision.duration{${O}=fail-closed}`]: 1,
      [`ratelimit.store.errors{error.type=${error.name}}`]: 1,
    });
    const closed = {
      [P]: 'closed',
      [O]: 'fail-closed',
      'ratelimit.limit': 5,
      'ratelimit.remaining': 0,
      'ratelimit.retry_after_ms': 1_000,
      'ratelimit.reason': 'store-unavailable',
    };
    const [span] = await telemetry.spans(1);
    expect(span.attributes).toEqual(closed);
    expect(span.events).toEqual([{ name: 'ratelimit.rejected', attributes: closed }]);
  });
});

describe('OpenTelemetry module options', () => {
  let telemetry: TestTelemetry;
  let app: INestApplication | undefined;
  beforeEach(() => (telemetry = new TestTelemetry()));
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await telemetry.shutdown();
  });

  it('uses the global meter provider by default; spans: false leaves the span alone; durationBuckets reach the SDK', async () => {
    metrics.setGlobalMeterProvider(telemetry.meterProvider);
    try {
      app = await bootTraced('express', telemetry, RateLimitModule.forRoot({}), { spans: false, durationBuckets: [0.001, 0.01] });
      expect(await statuses(app, ['/limited'])).toEqual([200]);
      // A programmatic decision outside any span counts the same.
      await app.get(RateLimiterService).consume({ name: 'jobs', algorithm: 'gcra', limit: 10, window: '1m' }, 'worker-1');

      expect(await telemetry.points('ratelimit.')).toEqual({
        [`ratelimit.decisions{${O}=allowed,${P}=burst}`]: 1,
        [`ratelimit.decisions{${O}=allowed,${P}=jobs}`]: 1,
        [`ratelimit.decision.duration{${O}=allowed}`]: 2,
      });
      const all = await telemetry.metrics();
      expect(
        (all.get('ratelimit.decision.duration')!.dataPoints[0].value as { buckets: { boundaries: number[] } }).buckets.boundaries,
      ).toEqual([0.001, 0.01]);
      const [span] = await telemetry.spans(1);
      expect(span.attributes).toEqual({});
      expect(span.events).toEqual([]);
    } finally {
      metrics.disable();
    }
  });

  it.each<[RateLimitOpenTelemetryOptions, string]>([
    [{ durationBuckets: [0.1, 0.05] }, 'durationBuckets: [0.1,0.05] must be a non-empty array of finite seconds in increasing order.'],
    [{ spans: 'yes' as never }, 'spans: "yes" must be true or false.'],
    [{ meterName: '' }, 'meterName: "" must be a non-empty string.'],
    [{ meterProvider: {} as never }, "meterProvider: {} must be a MeterProvider (an object with getMeter), such as the SDK's."],
    [
      { tracerProvider: {} } as never,
      "unknown option 'tracerProvider'; known options are meterProvider, meterName, spans, durationBuckets.",
    ],
  ])('fails at bootstrap on bad options: %j', async (options, message) => {
    await expect(
      bootApp({ adapter: 'express', imports: [RateLimitModule.forRoot({}), RateLimitOpenTelemetryModule.forRoot(options)] }),
    ).rejects.toThrow(`RateLimitOpenTelemetryModule options: ${message}`);
  });
});
