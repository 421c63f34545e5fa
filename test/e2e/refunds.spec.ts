import { Controller, Get, Query, UnauthorizedException, type ExecutionContext, type INestApplication } from '@nestjs/common';
import { Redis } from 'ioredis';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitDecisionEvent, type RateLimitPolicy } from '../../lib';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { ADAPTERS, bootApp, sleep } from './harness';

const STORE_TIMEOUT_MS = 100;
/** How long the store stays skipped after a failure (ResilientStore's retryAfterFailureMs), with a margin. */
const CIRCUIT_MS = 300;

const login = (extra: Partial<RateLimitPolicy> = {}): RateLimitPolicy => ({
  name: 'login',
  algorithm: 'fixed-window',
  limit: 5,
  window: '1h',
  countOnly: 'failed',
  ...extra,
});
const tenant = (c: ExecutionContext) => c.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-tenant'] ?? 't';

@Controller()
class RefundsController {
  /** Any decision against the stalled store: it waits out the deadline and opens the circuit. */
  @Get('trip')
  @RateLimit({ algorithm: 'fixed-window', limit: 100, window: '1h' })
  trip() {
    return 'tripped';
  }

  @Get('login')
  @RateLimit(login({ onStoreError: 'fail-open' }))
  login(@Query('password') password: string) {
    if (password !== 'right') throw new UnauthorizedException();
    return 'welcome';
  }

  @Get('insured-login')
  @RateLimit(login({ onStoreError: 'insurance' }))
  insuredLogin(@Query('password') password: string) {
    if (password !== 'right') throw new UnauthorizedException();
    return 'welcome';
  }

  /** Two trackers: 'a' per IP (fail-open), 'b' per tenant (fail-closed, generous). */
  @Get('two-trackers')
  @RateLimit([
    { name: 'a', algorithm: 'fixed-window', limit: 5, window: '1h', onStoreError: 'fail-open' },
    { name: 'b', algorithm: 'fixed-window', limit: 100, window: '1h', by: tenant, onStoreError: 'fail-closed' },
  ])
  twoTrackers() {
    return 'ok';
  }

  @Get('export')
  @RateLimit({ algorithm: 'concurrency', limit: 2, window: '1m', onStoreError: 'fail-open' })
  export() {
    return 'exported';
  }
}

describe.each(ADAPTERS)('refunds and releases after a Redis outage (SIGSTOP) on %s', (adapter) => {
  let server: RedisProcess;
  let client: Redis;
  let app: INestApplication;
  let prefixes = 0;
  const storeErrors: Error[] = [];
  const decisions: RateLimitDecisionEvent[] = [];
  beforeAll(async () => {
    server = await startRedis();
    client = new Redis(server.url);
    await client.ping();
  });
  beforeEach(async () => {
    storeErrors.length = 0;
    decisions.length = 0;
    app = await bootApp({
      adapter,
      imports: [
        RateLimitModule.forRoot({
          redis: client,
          prefix: `refunds${process.pid}-${++prefixes}`,
          storeTimeoutMs: STORE_TIMEOUT_MS,
          storeErrorLogIntervalMs: 60_000,
          hooks: { storeError: (error) => storeErrors.push(error), decision: (event) => decisions.push(event) },
        }),
      ],
      controllers: [RefundsController],
    });
    // A fresh app's first decision (loading the scripts) can miss the deadline: warm up until Redis decides.
    for (let i = 0; i < 5; i++) {
      await get('/trip');
      if (decisions[decisions.length - 1].decisions[0].reason === undefined) break;
      await sleep(CIRCUIT_MS);
    }
    storeErrors.length = 0;
    decisions.length = 0;
  });
  afterEach(async () => {
    server.resume();
    await app.close();
  });
  afterAll(async () => {
    await client.quit();
    await server.stop();
  });

  const get = (path: string, headers: Record<string, string> = {}) => request(app.getHttpServer()).get(path).set(headers);
  const statuses = async (path: string, times: number, headers: Record<string, string> = {}) => {
    const out: number[] = [];
    for (let i = 0; i < times; i++) out.push((await get(path, headers)).status);
    return out;
  };
  /** Stalls Redis, then makes one decision wait out its deadline, so the next ones are answered by the fallback at once. */
  const stallRedis = async () => {
    server.pause();
    expect((await get('/trip')).status).toBe(200);
  };
  /** Wakes Redis, lets it run what queued up meanwhile, and waits until the store is asked again. */
  const wakeRedis = async () => {
    server.resume();
    await client.ping();
    await sleep(CIRCUIT_MS);
    decisions.length = 0;
  };
  const reasonsOf = (policy: string) => decisions.flatMap((e) => e.decisions.filter((d) => d.policy === policy).map((d) => d.reason));
  /** Every decision so far was Redis's own (none by a fallback), then forgets them. */
  const decidedByRedis = () => {
    expect(decisions.flatMap((e) => e.decisions.map((d) => d.reason))).not.toContain('store-unavailable');
    decisions.length = 0;
  };

  it("countOnly: 'failed': successes decided by fail-open during the outage do not erase the failures Redis counted", async () => {
    expect(await statuses('/login?password=wrong', 3)).toEqual([401, 401, 401]);
    decidedByRedis();
    await stallRedis();
    decisions.length = 0;
    expect(await statuses('/login?password=right', 6)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(reasonsOf('login')).toEqual(new Array(6).fill('store-unavailable'));
    await wakeRedis();
    // 3 failures counted of 5: two more are allowed, then the lockout.
    expect(await statuses('/login?password=wrong', 3)).toEqual([401, 401, 429]);
    decidedByRedis();
  });

  it("countOnly: 'failed' with insurance: successes are refunded to the insurance store only, never to Redis", async () => {
    expect(await statuses('/insured-login?password=wrong', 3)).toEqual([401, 401, 401]);
    decidedByRedis();
    await stallRedis();
    decisions.length = 0;
    // Insurance holds the whole limit (insuranceShare 1): six successes pass only if each is refunded there.
    expect(await statuses('/insured-login?password=right', 6)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(reasonsOf('login')).toEqual(new Array(6).fill('store-unavailable'));
    await wakeRedis();
    expect(await statuses('/insured-login?password=wrong', 3)).toEqual([401, 401, 429]);
    decidedByRedis();
  });

  it('a request rejected by another tracker during the outage does not refund what the fallback allowed', async () => {
    expect(await statuses('/two-trackers', 3)).toEqual([200, 200, 200]);
    decidedByRedis();
    await stallRedis();
    // 'b' fails closed (503); 'a' was allowed by fail-open, which charged nothing in Redis.
    expect((await get('/two-trackers')).status).toBe(503);
    await wakeRedis();
    // 'a' still counts 3 of 5.
    expect(await statuses('/two-trackers', 3)).toEqual([200, 200, 429]);
    decidedByRedis();
  });

  it('leases granted by fail-open during the outage are not released in Redis', async () => {
    await stallRedis();
    const tripErrors = storeErrors.length;
    expect(await statuses('/export', 3)).toEqual([200, 200, 200]);
    expect(reasonsOf('default').slice(-3)).toEqual(new Array(3).fill('store-unavailable'));
    await sleep(STORE_TIMEOUT_MS * 3); // a release sent to the stalled Redis would have timed out by now
    expect(storeErrors.slice(tripErrors).map((e) => e.message)).toEqual([]);
    await wakeRedis();
    expect(await Promise.all([get('/export'), get('/export')]).then((r) => r.map((x) => x.status))).toEqual([200, 200]);
  });
});
