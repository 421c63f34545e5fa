/**
 * A global limit with quota slices (`slice`) through the guard, on Express and Fastify × memory and Redis: the
 * same answers and headers as without slices for one instance, with Redis running one script per slice.
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import { parseItem, parseList } from 'structured-headers';
import request from 'supertest';
import { RateLimit } from '../../lib';
import { SLICE_LIFETIME_MS } from '../../lib/pipeline/slicing.store';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';
import type Redis from 'ioredis';

const HOUR = 3_600_000;

@Controller()
class ApiController {
  @Get('api')
  @RateLimit({ algorithm: 'fixed-window', limit: 60, window: '1h', by: () => 'whole-api', slice: 10 })
  api() {
    return 'ok';
  }

  @Get('warm')
  @RateLimit({ algorithm: 'fixed-window', limit: 60, window: '1h' })
  warm() {
    return 'ok';
  }
}

/**
 * The script calls of decisions while `work` runs, as MONITOR sees them: not the runtime overrides' poll, which
 * runs a script of its own every 500 ms (on its `{overrides}` keys) however long the requests take.
 */
async function decisionScripts(client: Redis, work: () => Promise<void>): Promise<number> {
  const monitor = await client.monitor();
  let calls = 0;
  let done!: () => void;
  const seenEnd = new Promise<void>((resolve) => (done = resolve));
  monitor.on('monitor', (_time: string, args: unknown[]) => {
    const command = String(args[0]).toLowerCase();
    if (command === 'echo' && args[1] === 'slices-end') done();
    else if (
      (command === 'evalsha' || command === 'eval' || command === 'fcall') &&
      !args.some((arg) => String(arg).includes('{overrides}'))
    )
      calls++;
  });
  await work();
  // MONITOR's lines arrive on their own connection: wait until it has shown a command sent after the work.
  await client.echo('slices-end');
  await seenEnd;
  monitor.disconnect();
  return calls;
}

/** The `RateLimit` field's `r` through the RFC 9651 parser. */
const remaining = (res: request.Response): unknown => Object.fromEntries(parseList(String(res.headers['ratelimit']))[0][1]).r;

describe.each(MATRIX)('a sliced global limit on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  beforeAll(async () => {
    app = await bootApp({ adapter, imports: [await rateLimitModule(store, redis)], controllers: [ApiController] });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });

  it('admits 60, with the remaining count of every answer exact, then 429 until the window ends', async () => {
    // An aligned hour: keep the test away from its end.
    const left = HOUR - (Date.now() % HOUR);
    if (left < 30_000) await sleep(left + 20);
    // A first request loads the script on the app's connection (a script call of its own).
    await request(app.getHttpServer()).get('/warm').expect(200);
    const answers: Array<[number, unknown]> = [];
    let elapsed = 0;
    const requests = async () => {
      const started = performance.now();
      for (let i = 0; i < 60; i++) {
        const res = await request(app.getHttpServer()).get('/api');
        answers.push([res.status, remaining(res)]);
      }
      elapsed = performance.now() - started;
    };
    const calls = store === 'redis' ? await decisionScripts(await redis.client(), requests) : await requests();
    expect(answers).toEqual(Array.from({ length: 60 }, (_, i) => [200, 59 - i]));
    // With Redis, one script per slice of 10; a slice that outlived SLICE_LIFETIME_MS (a busy machine serving its 10
    // requests slowly) also gives its rest back, one script more, at most once per slice.
    if (store === 'redis') {
      if (elapsed < SLICE_LIFETIME_MS) {
        expect(calls).toBe(6);
      } else {
        expect(calls).toBeGreaterThanOrEqual(6);
        expect(calls).toBeLessThanOrEqual(12);
      }
    }
    const rejected = await request(app.getHttpServer()).get('/api');
    expect(rejected.status).toBe(429);
    const wait = parseItem(String(rejected.headers['retry-after']))[0] as number;
    expect(Math.abs(wait - Math.ceil((HOUR - (Date.now() % HOUR)) / 1_000))).toBeLessThanOrEqual(1);
  });
});
