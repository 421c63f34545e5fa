/**
 * A `concurrency` 429 tells the client a hint (the route's running average of how long leases are held,
 * rounded up to whole seconds) in `Retry-After` and in the `RateLimit` member's `t` alike, while the decision
 * the `hooks.decision` event carries keeps the exact soonest lease expiry (`retryAfterMs` and `moreQuotaMs`).
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, type RateLimitDecisionEvent } from '../../lib';
import { Gate } from '../support/gate';
import { fieldMembers, timed } from '../support/rate-limit-fields';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

const LEASE_MS = 60_000;

@Controller()
class LeaseHintController {
  constructor(private readonly gate: Gate) {}

  @Get('slot')
  @RateLimit({ algorithm: 'concurrency', limit: 1, window: LEASE_MS, name: 'slots' })
  async slot() {
    await this.gate.pass();
    return 'done';
  }
}

describe.each(MATRIX)('the lease hint of a concurrency 429 on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  const events: RateLimitDecisionEvent[] = [];
  beforeAll(async () => {
    app = await bootApp({
      adapter,
      // draft-10 sends the hint as t too (draft-11 sends no t for concurrency).
      imports: [await rateLimitModule(store, redis, { hooks: { decision: (event) => events.push(event) }, headerProfile: 'draft-10' })],
      controllers: [LeaseHintController],
      providers: [Gate],
    });
  });
  afterAll(async () => {
    app.get(Gate).release(); // a failed expectation must not leave a handler waiting
    await app.close();
    await redis.stop();
  });

  it('is in Retry-After and t, while hooks.decision keeps the soonest lease expiry', async () => {
    const gate = app.get(Gate);
    gate.release();
    expect((await request(app.getHttpServer()).get('/slot')).status).toBe(200); // a lease held a few ms, released

    // One request holds the only slot, its lease taken after takenFrom.
    gate.close();
    const takenFrom = Date.now();
    const holder = request(app.getHttpServer())
      .get('/slot')
      .then((res) => res);
    while (gate.inside === 0) await sleep(5);

    const { res, after } = await timed(() => request(app.getHttpServer()).get('/slot'));
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.body.retryAfter).toBe(1);
    expect(fieldMembers(res.headers['ratelimit'])).toEqual([{ name: 'slots', r: 0, t: 1 }]);

    const rejected = events.filter((event) => !event.allowed);
    expect(rejected).toHaveLength(1);
    const [decision] = rejected[0].decisions;
    expect(decision).toMatchObject({ allowed: false, policy: 'slots', limit: 1, remaining: 0 });
    expect(decision.reason).toBeUndefined();
    // The held lease expires LEASE_MS after it was taken: never later, and no sooner than the time since then allows.
    expect(decision.retryAfterMs).toBeLessThanOrEqual(LEASE_MS);
    expect(decision.retryAfterMs).toBeGreaterThanOrEqual(LEASE_MS - (after - takenFrom));
    expect(decision.moreQuotaMs).toBe(decision.retryAfterMs);
    console.log(
      `${adapter}/${store}: a concurrency 429 sent Retry-After 1 and t=1; hooks.decision kept retryAfterMs = moreQuotaMs = ${decision.retryAfterMs}`,
    );

    gate.release();
    expect((await holder).status).toBe(200);
  });
});
