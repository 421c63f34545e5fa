import { Controller, Get, Injectable, type INestApplication } from '@nestjs/common';
import { EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Registry } from 'prom-client';
import request from 'supertest';
import {
  RATE_LIMIT_EVENTS,
  RateLimit,
  RateLimitEvents,
  RateLimitModule,
  type RateLimitDecision,
  type RateLimitModuleOptions,
} from '../../lib';
import { RateLimitEventEmitterModule } from '../../lib/event-emitter';
import { RateLimitPrometheusModule } from '../../lib/prometheus';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, type AdapterName } from './harness';

@Controller()
class LimitedController {
  @Get('five')
  @RateLimit({ name: 'five', algorithm: 'fixed-window', limit: 5, window: '1h' })
  five() {
    return 'five';
  }

  @Get('ten')
  @RateLimit({ name: 'ten', algorithm: 'token-bucket', limit: 10, window: '1h' })
  ten() {
    return 'ten';
  }
}

/** `policy=remaining` of a near-limit decision. */
const summary = (d: RateLimitDecision) => `${d.policy}=${d.remaining}`;

/** The three ways to listen: a `RateLimitEvents` subscriber and an `@OnEvent` handler (plus the options' hook). */
@Injectable()
class NearLimitRecorder {
  readonly subscribed: string[] = [];
  readonly emitted: string[] = [];

  constructor(events: RateLimitEvents) {
    events.subscribe({ nearLimit: (d) => this.subscribed.push(summary(d)) });
  }

  @OnEvent(RATE_LIMIT_EVENTS.nearLimit)
  onNearLimit(decision: RateLimitDecision) {
    this.emitted.push(summary(decision));
  }
}

async function get(app: INestApplication, path: string, times: number): Promise<number[]> {
  const statuses = [];
  for (let i = 0; i < times; i++) statuses.push((await request(app.getHttpServer()).get(path)).status);
  return statuses;
}

describe.each(MATRIX)('near-limit decisions on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => redis.stop());

  const boot = async (options: RateLimitModuleOptions, registry: Registry) => {
    const hooked: string[] = [];
    app = await bootApp({
      adapter: adapter as AdapterName,
      imports: [
        EventEmitterModule.forRoot(),
        await rateLimitModule(store, redis, { ...options, hooks: { nearLimit: (d) => hooked.push(summary(d)) } }),
        RateLimitEventEmitterModule,
        RateLimitPrometheusModule.forRoot({ registry }),
      ],
      controllers: [LimitedController],
      providers: [NearLimitRecorder],
    });
    return { app, hooked, recorder: app.get(NearLimitRecorder) };
  };

  it('reach the hook, RateLimitEvents, @OnEvent and Prometheus for each allowed decision within nearLimitRatio', async () => {
    const registry = new Registry();
    const { app, hooked, recorder } = await boot({ nearLimitRatio: 0.4 }, registry);
    expect(await get(app, '/five', 6)).toEqual([200, 200, 200, 200, 200, 429]);

    // floor(0.4 × 5) = 2 units left or fewer; the rejection is not a near-limit decision.
    const near = ['five=2', 'five=1', 'five=0'];
    expect(hooked).toEqual(near);
    expect(recorder.subscribed).toEqual(near);
    expect(recorder.emitted).toEqual(near);
    expect((await registry.getSingleMetric('rate_limit_near_limit_total')!.get()).values).toEqual([
      { value: 3, labels: { policy: 'five' } },
    ]);
  });

  it('default to 10 % of the limit (the burst capacity for bucket algorithms)', async () => {
    const { app, hooked, recorder } = await boot({}, new Registry());
    expect(await get(app, '/ten', 10)).toEqual(Array(10).fill(200));
    expect(hooked).toEqual(['ten=1', 'ten=0']);
    expect(recorder.emitted).toEqual(['ten=1', 'ten=0']);
  });
});

describe('nearLimitRatio', () => {
  it.each([[1], [-0.1], [Number.NaN], ['0.1' as never]])('%p fails at bootstrap, naming the option and what is allowed', async (ratio) => {
    await expect(
      bootApp({
        adapter: 'express',
        imports: [RateLimitModule.forRoot({ nearLimitRatio: ratio as number })],
        controllers: [LimitedController],
      }),
    ).rejects.toThrow(
      `RateLimitModule options: nearLimitRatio: ${typeof ratio === 'string' ? `"${ratio}"` : String(ratio)} must be a number in [0, 1)`,
    );
  });
});
