import { Body, Controller, Logger, Post, type ExecutionContext, type INestApplication } from '@nestjs/common';
import { parseList } from 'structured-headers';
import request from 'supertest';
import { RateLimit, RateLimiterService, type RateLimitPolicy } from '../../lib';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

/** A list field's members through the RFC 9651 parser: name and parameters. */
const members = (field: string): Array<Record<string, unknown>> =>
  parseList(field).map(([name, params]) => ({ name, ...Object.fromEntries(params) }));

interface Completion {
  maxTokens: number;
  used: number;
  fail?: boolean;
}
const requestOf = (ctx: ExecutionContext) => ctx.switchToHttp().getRequest<{ headers: Record<string, string>; body: Completion }>();
const apiKey = (ctx: ExecutionContext) => `key:${requestOf(ctx).headers['x-api-key']}`;

/** 100 tokens of burst, one refilled every 10 s: nothing refills while a test runs. */
const tokens = (name: string, settle: RateLimitPolicy['settle'], extra: Partial<RateLimitPolicy> = {}): RateLimitPolicy => ({
  name,
  algorithm: 'token-bucket',
  limit: 100,
  window: '1000s',
  scope: name,
  by: apiKey,
  cost: (ctx) => requestOf(ctx).body.maxTokens,
  settle,
  ...extra,
});
const DOWNLOAD: RateLimitPolicy = {
  name: 'bytes',
  algorithm: 'sliding-window',
  limit: 1_000_000,
  window: '1m',
  scope: 'downloads',
  by: apiKey,
  cost: 65_536,
  quotaUnit: 'content-bytes',
};
const used = (_ctx: ExecutionContext, result: unknown) => (result as { used: number } | undefined)?.used ?? 0;
const seen: unknown[] = [];

@Controller()
class SettleController {
  @Post('complete')
  @RateLimit(tokens('tokens', used))
  complete(@Body() body: Completion) {
    if (body.fail) throw new Error('the model failed');
    return { used: body.used };
  }

  @Post('throwing')
  @RateLimit(
    tokens('throwing', () => {
      throw new Error('no usage in the reply');
    }),
  )
  throwing() {
    return 'ok';
  }

  @Post('pending')
  @RateLimit(tokens('pending', () => new Promise<number>(() => undefined)))
  pending() {
    return 'ok';
  }

  @Post('seen')
  @RateLimit(tokens('seen', (_ctx, result) => (seen.push(result), 0)))
  seenResult(@Body() body: Completion) {
    if (body.fail) throw new Error('failed');
    return { used: body.used };
  }

  @Post('trial')
  @RateLimit([tokens('enforced', used), tokens('trial', used, { mode: 'shadow', limit: 200, window: '100s' })])
  trial(@Body() body: Completion) {
    return { used: body.used };
  }

  /** A download metered in bytes: 1 MB per minute, charged 64 KiB up front, settled at the bytes sent. */
  @Post('download')
  @RateLimit({ ...DOWNLOAD, settle: (_ctx, result) => Buffer.byteLength(result as string) })
  download() {
    return 'x'.repeat(1_000);
  }
}

describe.each(MATRIX)('reserve and settle over HTTP on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let warn: jest.SpyInstance;

  beforeEach(async () => {
    seen.length = 0;
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis, { userFunctionTimeoutMs: 200, headers: 'ietf', headerProfile: 'draft-10' })],
      controllers: [SettleController],
    });
  });
  afterEach(async () => {
    warn.mockRestore();
    await app.close();
  });
  afterAll(() => redis.stop());

  const post = (path: string, body: Partial<Completion>, key = 'a') =>
    request(app.getHttpServer()).post(path).set('x-api-key', key).send(body);
  /** What the route's counter holds now, read through the service (the policy has a scope). */
  const peek = (policy: RateLimitPolicy, key = 'a') => app.get(RateLimiterService).peek(policy, `key:${key}`, { cost: 1 });
  /** Waits until the settlement, which runs after the response, has reached the store. */
  const until = async (check: () => Promise<boolean>) => {
    for (const started = Date.now(); !(await check()); await sleep(5)) {
      if (Date.now() - started > 5_000) throw new Error('the settlement did not happen within 5 s');
    }
  };

  it('gives back an over-estimate, then charges an overdraw: the next request gets an exact 429', async () => {
    const first = await post('/complete', { maxTokens: 30, used: 10 });
    expect(first.status).toBe(201);
    expect(members(first.headers['ratelimit-policy'])).toEqual([{ name: 'tokens', q: 100, w: 1000 }]);
    expect(members(first.headers['ratelimit'])).toEqual([{ name: 'tokens', r: 70, t: 10 }]);
    await until(async () => (await peek(tokens('tokens', used))).remaining === 90);

    const second = await post('/complete', { maxTokens: 50, used: 140 });
    expect(members(second.headers['ratelimit'])).toEqual([{ name: 'tokens', r: 40, t: 10 }]);
    // 10 + 140 = 150 tokens of 100: the quota is 50 below zero.
    await until(async () => !(await peek(tokens('tokens', used))).allowed);

    const third = await post('/complete', { maxTokens: 1, used: 1 });
    expect(third.status).toBe(429);
    // One token fits once 51 have refilled, 10 s each.
    expect(third.headers['retry-after']).toBe('510');
    expect(third.body.retryAfter).toBe(510);
    expect(members(third.headers['ratelimit'])).toEqual([{ name: 'tokens', r: 0, t: 510 }]);
    // Another key is untouched.
    expect(members((await post('/complete', { maxTokens: 1, used: 1 }, 'b')).headers['ratelimit'])).toEqual([
      { name: 'tokens', r: 99, t: 10 },
    ]);
  });

  it('a handler that threw settles with result undefined', async () => {
    expect((await post('/seen', { maxTokens: 40, used: 5, fail: true })).status).toBe(500);
    await until(async () => seen.length === 1);
    expect(seen).toEqual([undefined]);
    expect((await post('/seen', { maxTokens: 40, used: 5 })).status).toBe(201);
    await until(async () => seen.length === 2);
    expect(seen).toEqual([undefined, { used: 5 }]);
    // Both settled at 0 (the function says so): the whole estimate came back each time.
    await until(async () => (await peek(tokens('seen', used))).remaining === 100);
  });

  const settleWarnings = () => warn.mock.calls.map((c: unknown[]) => String(c[0])).filter((line) => line.includes('settle'));

  it('a settle function that throws leaves the estimate charged and is logged', async () => {
    expect((await post('/throwing', { maxTokens: 30 })).status).toBe(201);
    await until(async () => settleWarnings().length === 1);
    expect(settleWarnings()).toEqual([
      "@RateLimit on SettleController.throwing ('throwing'): settle: threw no usage in the reply; the estimate stays charged.",
    ]);
    expect((await peek(tokens('throwing', used))).remaining).toBe(70);
  });

  it('a settle function that misses userFunctionTimeoutMs leaves the estimate charged and is logged', async () => {
    expect((await post('/pending', { maxTokens: 20 })).status).toBe(201);
    await until(async () => settleWarnings().length === 1);
    expect(settleWarnings()).toEqual([
      "@RateLimit on SettleController.pending ('pending'): settle: the function did not settle within 200 ms (userFunctionTimeoutMs); the estimate stays charged.",
    ]);
    expect((await peek(tokens('pending', used))).remaining).toBe(80);
  });

  it('shadow policies settle too', async () => {
    const trial = tokens('trial', used, { mode: 'shadow', limit: 200, window: '100s' });
    expect((await post('/trial', { maxTokens: 60, used: 25 })).status).toBe(201);
    await until(async () => (await peek(tokens('enforced', used))).remaining === 75);
    expect((await peek(trial)).remaining).toBe(175);
  });

  it('states bytes as the quota unit and settles at the bytes sent', async () => {
    const res = await post('/download', {});
    expect(res.status).toBe(201);
    expect(members(res.headers['ratelimit-policy'])).toEqual([{ name: 'bytes', q: 1_000_000, w: 60, qu: 'content-bytes' }]);
    expect(members(res.headers['ratelimit'])[0]).toMatchObject({ name: 'bytes', r: 1_000_000 - 65_536 });
    await until(async () => (await peek(DOWNLOAD)).remaining === 1_000_000 - 1_000);
    const next = await post('/download', {});
    expect(members(next.headers['ratelimit'])[0]).toMatchObject({ name: 'bytes', r: 1_000_000 - 1_000 - 65_536 });
  });
});
