import { Controller, Get, Injectable, type INestApplication } from '@nestjs/common';
import { EventEmitterModule, OnEvent } from '@nestjs/event-emitter';
import { Redis } from 'ioredis';
import request from 'supertest';
import {
  RATE_LIMIT_EVENTS,
  RateLimit,
  RateLimitEvents,
  RateLimitModule,
  type RateLimitDecisionEvent,
  type RateLimitModuleOptions,
} from '../../lib';
import { RateLimitEventEmitterModule } from '../../lib/event-emitter';
import { startRedis } from '../support/redis-server';
import { ADAPTERS, bootApp, type AdapterName } from './harness';

@Controller()
class LimitedController {
  @Get('limited')
  @RateLimit({ name: 'burst', algorithm: 'fixed-window', limit: 2, window: '1h' })
  limited() {
    return 'limited';
  }
}

/** What a user's listeners would record: `@OnEvent` handlers, and a subscriber of the typed bus. */
@Injectable()
class Recorder {
  readonly emitted: string[] = [];
  readonly subscribed: string[] = [];
  /** The store errors, as emitted and as subscribed. */
  readonly errors: Array<{ via: string; error: Error }> = [];

  constructor(events: RateLimitEvents) {
    events.subscribe({
      decision: (e) => this.subscribed.push(summary(e)),
      storeError: (error) => this.errors.push({ via: 'subscribe', error }),
    });
  }

  @OnEvent(RATE_LIMIT_EVENTS.decision)
  onDecision(event: RateLimitDecisionEvent) {
    this.emitted.push(`decision:${summary(event)}`);
  }

  @OnEvent(RATE_LIMIT_EVENTS.rejected)
  onRejected(event: RateLimitDecisionEvent) {
    this.emitted.push(`rejected:${summary(event)}`);
  }

  @OnEvent(RATE_LIMIT_EVENTS.storeError)
  onStoreError(error: Error) {
    this.emitted.push('store-error');
    this.errors.push({ via: 'event-emitter', error });
  }
}

const summary = (e: RateLimitDecisionEvent) =>
  `${e.allowed}:${e.decisions.map((d) => `${d.policy}=${d.remaining}/${d.reason ?? 'counter'}`).join(',')}`;

const bootEventsApp = (adapter: AdapterName, options: RateLimitModuleOptions) =>
  bootApp({
    adapter,
    imports: [EventEmitterModule.forRoot(), RateLimitModule.forRoot(options), RateLimitEventEmitterModule],
    controllers: [LimitedController],
    providers: [Recorder],
  });

describe.each(ADAPTERS)('rate-limit events on %s', (adapter) => {
  let app: INestApplication | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it("every decision reaches the options' hook, RateLimitEvents subscribers and @OnEvent listeners; rejections also as rate-limit.rejected", async () => {
    const hooked: string[] = [];
    app = await bootEventsApp(adapter, { hooks: { decision: (e) => hooked.push(summary(e)) } });
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await request(app.getHttpServer()).get('/limited')).status);
    expect(statuses).toEqual([200, 200, 429]);

    const recorder = app.get(Recorder);
    const decisions = ['true:burst=1/counter', 'true:burst=0/counter', 'false:burst=0/counter'];
    expect(hooked).toEqual(decisions);
    expect(recorder.subscribed).toEqual(decisions);
    expect(recorder.emitted).toEqual([
      'decision:true:burst=1/counter',
      'decision:true:burst=0/counter',
      'decision:false:burst=0/counter',
      'rejected:false:burst=0/counter',
    ]);
  });

  it('a store error is emitted as rate-limit.store-error, and the fallback decision (the default: insurance) as usual', async () => {
    const redis = await startRedis();
    const client = new Redis(redis.url, { maxRetriesPerRequest: 0 });
    client.on('error', () => undefined); // the server is stopped on purpose
    await client.ping();
    try {
      app = await bootEventsApp(adapter, { redis: client, storeTimeoutMs: 50 });
      await redis.stop();
      expect((await request(app.getHttpServer()).get('/limited')).status).toBe(200);

      const recorder = app.get(Recorder);
      // The in-process insurance twin counted the request: 1 of the 2 left.
      expect(recorder.emitted).toEqual(['store-error', 'decision:true:burst=1/store-unavailable']);
      expect(recorder.subscribed).toEqual(['true:burst=1/store-unavailable']);
      // One failure, the same Error object both ways (its message is the client's).
      expect(recorder.errors.map((e) => e.via)).toEqual(['subscribe', 'event-emitter']);
      expect(recorder.errors[0].error).toBeInstanceOf(Error);
      expect(recorder.errors[1].error).toBe(recorder.errors[0].error);
    } finally {
      await app?.close();
      app = undefined;
      client.disconnect();
    }
  });
});
