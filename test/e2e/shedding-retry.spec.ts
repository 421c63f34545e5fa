/**
 * A client that honours `Retry-After` gets no second 429 from hot-key shedding (on by default with Redis).
 * Shedding remembers a rejection and answers the same request locally until its retry time; an admission
 * this instance sends for the key in the meantime makes that remembered wait too short, so it must be
 * forgotten. gcra 2 per 2 s, burst 2 (one unit back per second): cost 2 admitted, cost 2 rejected (and
 * remembered), a second later cost 1 admitted, then cost 2 must be told the true wait, ~2 s, not the ~1 s
 * left of the remembered rejection.
 */
import { Controller, Get, type ExecutionContext, type INestApplication } from '@nestjs/common';
import { parseItem, parseList } from 'structured-headers';
import request from 'supertest';
import { RateLimit } from '../../lib';
import { ADAPTERS, bootApp, rateLimitModule, SharedRedis, sleep } from './harness';
import { scriptCalls as scriptCallsOf } from '../support/redis-server';

const costOf = (context: ExecutionContext) => Number(context.switchToHttp().getRequest<{ query: Record<string, string> }>().query.cost);

@Controller()
class SheddingController {
  @Get('spend')
  @RateLimit({ algorithm: 'gcra', limit: 2, window: '2s', burst: 2, cost: costOf })
  spend() {
    return 'spent';
  }
}

/** The `RateLimit` field's members through the RFC 9651 parser: name and parameters. */
const members = (field: string | undefined): Array<Record<string, unknown>> =>
  parseList(field ?? '').map(([name, params]) => ({ name, ...Object.fromEntries(params) }));

/** `Retry-After` through the RFC 9651 parser: an Integer of seconds. */
const retryAfter = (res: request.Response): unknown => parseItem(String(res.headers['retry-after']))[0];

describe.each(ADAPTERS)('a retry told under hot-key shedding, on %s with the Redis store', (adapter) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule('redis', redis, { headerProfile: 'draft-10' })],
      controllers: [SheddingController],
    });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  const scriptCalls = async () => scriptCallsOf(await redis.client());
  const spend = (cost: number) => request(app.getHttpServer()).get(`/spend?cost=${cost}`);

  it('is the true wait after an admission of this instance, and honouring it gets a 200', async () => {
    const first = await spend(2);
    expect(first.status).toBe(200);
    expect(members(first.headers['ratelimit'])).toEqual([{ name: 'default', r: 0, t: 1 }]);

    const rejected = await spend(2);
    expect(rejected.status).toBe(429);
    expect(retryAfter(rejected)).toBe(2);
    // The same request again is answered by shedding: Redis runs no script for it.
    await (await redis.client()).config('RESETSTAT');
    const shed = await spend(2);
    expect([shed.status, retryAfter(shed)]).toEqual([429, 2]);
    expect(await scriptCalls()).toBe(0);

    await sleep(1_000);
    const cheaper = await spend(1); // one unit has come back: admitted, which moves the key on
    expect(cheaper.status).toBe(200);
    expect(members(cheaper.headers['ratelimit'])).toEqual([{ name: 'default', r: 0, t: 1 }]);

    // Cost 2 now needs both units: the one back in under a second and the next, a second after it.
    const again = await spend(2);
    expect(again.status).toBe(429);
    expect(again.headers['retry-after']).toBe('2');
    expect(again.body.retryAfter).toBe(2);
    expect(members(again.headers['ratelimit'])).toEqual([{ name: 'default', r: 0, t: 1 }]);

    await sleep(Number(again.headers['retry-after']) * 1_000 + 50);
    const honoured = await spend(2);
    expect(honoured.status).toBe(200);
    expect(members(honoured.headers['ratelimit'])).toEqual([{ name: 'default', r: 0, t: 1 }]);
  });
});
