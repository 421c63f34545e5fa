/**
 * Shutdown on a real Nest app, on the memory store and on a real Redis (a URL, so the module owns the client
 * and closes it): closing the app ends every pending `acquire()` wait at once with a RateLimitShutdownError, an
 * HTTP request waiting in `acquire()` does not hold `app.close()` up, nothing is decided after close (a closed
 * store must not grant with its fallback), and a process whose app closed exits at once (no timer of ours keeps
 * it alive).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { Controller, Get, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimitModule, RateLimiterService, RateLimitWaitError, type RateLimitPolicy } from '../../lib';
import { RateLimitShutdownError } from '../../lib';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { bootApp, MATRIX, sleep, type StoreName } from './harness';

/** One unit per 20 s: once it is taken, every acquire must wait about 20 s. */
const PARTNER: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: '20s', name: 'partner' };

@Controller('partner')
class PartnerController {
  constructor(private readonly limiter: RateLimiterService) {}

  @Get()
  async call(): Promise<string> {
    await this.limiter.acquire(PARTNER, 'partner-http', { maxWaitMs: 60_000 });
    return 'called';
  }
}

let redis: RedisProcess;
let prefixes = 0;
beforeAll(async () => {
  redis = await startRedis();
}, 30_000);
afterAll(async () => {
  await redis?.stop();
});

describe.each(MATRIX)('shutdown ($adapter, $store store)', ({ adapter, store }) => {
  let app: INestApplication;
  let decisions: number;

  beforeEach(async () => {
    decisions = 0;
    app = await bootApp({
      adapter,
      imports: [
        RateLimitModule.forRoot({
          redis: store === 'redis' ? redis.url : undefined,
          prefix: `shutdown${process.pid}-${++prefixes}`,
          hooks: { decision: () => decisions++ },
        }),
      ],
      controllers: [PartnerController],
    });
  });

  it('app.close() ends pending acquire() waits at once; nothing is decided or granted after it', async () => {
    const limiter = app.get(RateLimiterService);
    expect((await limiter.acquire(PARTNER, 'partner')).allowed).toBe(true);
    const settled: Array<{ ms: number; value: unknown }> = [];
    let closeStarted = 0;
    // Waiters are served in turn, one token per 20 s: the third starts 60 s on, so each may wait 2 minutes.
    const waits = Array.from({ length: 3 }, () =>
      limiter.acquire(PARTNER, 'partner', { maxWaitMs: 120_000 }).then(
        (value) => settled.push({ ms: performance.now() - closeStarted, value }),
        (error: unknown) => settled.push({ ms: performance.now() - closeStarted, value: error }),
      ),
    );
    await sleep(100);
    expect(settled).toEqual([]);
    const decidedBeforeClose = decisions;

    closeStarted = performance.now();
    await app.close();
    const closeMs = performance.now() - closeStarted;
    await Promise.all(waits);
    const slowest = Math.max(...settled.map((s) => s.ms));
    console.log(
      `${adapter}/${store}: app.close() took ${closeMs.toFixed(1)} ms; the 3 waits rejected within ${slowest.toFixed(1)} ms of its start`,
    );
    expect(slowest).toBeLessThan(100);
    for (const { value } of settled) {
      expect(value).toBeInstanceOf(RateLimitShutdownError);
      expect(value).toBeInstanceOf(RateLimitWaitError);
      expect((value as Error).message).toBe(
        "acquire: the application is shutting down; the wait of 'partner' for policy 'partner' ended (nothing was taken).",
      );
    }

    // After close: every call rejects with the same error, and none reaches a store (nor its fallback).
    await expect(limiter.consume(PARTNER, 'partner')).rejects.toThrow(RateLimitShutdownError);
    await expect(limiter.consume(PARTNER, 'partner')).rejects.toThrow(
      'RateLimiterService: the application is shutting down; the rate-limit store is closed, so nothing is decided.',
    );
    await expect(limiter.acquire(PARTNER, 'fresh')).rejects.toThrow(RateLimitShutdownError);
    await expect(limiter.peek(PARTNER, 'fresh')).rejects.toThrow(RateLimitShutdownError);
    await expect(limiter.lease({ algorithm: 'concurrency', limit: 1, window: '1s' }, 'fresh')).rejects.toThrow(RateLimitShutdownError);
    await sleep(200);
    expect(decisions).toBe(decidedBeforeClose);
  }, 15_000);

  it('an HTTP request waiting in acquire() does not hold app.close() up: it ends with an error at once', async () => {
    await app.listen(0);
    const limiter = app.get(RateLimiterService);
    await limiter.acquire(PARTNER, 'partner-http');
    const response = request(app.getHttpServer())
      .get('/partner')
      .then(
        (res) => res.status,
        (error: Error) => error.message,
      );
    await sleep(150);
    const started = performance.now();
    await app.close();
    const closeMs = performance.now() - started;
    const status = await response;
    console.log(
      `${adapter}/${store}: with a request waiting in acquire(), app.close() took ${closeMs.toFixed(1)} ms; the request got ${status}`,
    );
    expect(closeMs).toBeLessThan(1_000);
    expect(status).toBe(500);
  }, 15_000);
});

describe('shutdown (a process of its own)', () => {
  it.each<StoreName>(['memory', 'redis'])(
    'a process whose app closed while acquire() calls waited exits at once: no timer keeps it alive (%s store)',
    async (store) => {
      const root = join(__dirname, '..', '..');
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        TS_NODE_PROJECT: join(root, 'tsconfig.json'),
        PREFIX: `shutdown-worker${process.pid}`,
        WAITS: '3',
      };
      // Without REDIS_URL the worker's module keeps its limits in memory.
      if (store === 'redis') env.REDIS_URL = redis.url;
      else delete env.REDIS_URL;
      let exitedAt = 0;
      const { stdout } = await new Promise<{ stdout: string }>((resolve, reject) => {
        execFile(
          process.execPath,
          ['-r', 'ts-node/register/transpile-only', join(root, 'test', 'support', 'shutdown-worker.ts')],
          {
            cwd: root,
            env,
            timeout: 15_000,
          },
          (error, out, err) => {
            exitedAt = Date.now();
            if (error) reject(new Error(`shutdown-worker failed: ${error.message}\n${err}`));
            else resolve({ stdout: out });
          },
        );
      });
      const { closeMs, closedAt, ended } = JSON.parse(stdout.trim().split('\n').pop()!) as {
        closeMs: number;
        closedAt: number;
        ended: Array<{ ms: number; outcome: string }>;
      };
      const exitMs = exitedAt - closedAt;
      console.log(
        `worker (${store} store): app.close() took ${closeMs.toFixed(1)} ms; waits ended ${ended.map((e) => `${e.outcome} after ${e.ms.toFixed(1)} ms`).join(', ')}; ` +
          `the process exited ${exitMs} ms after close began`,
      );
      expect(ended.map((e) => e.outcome)).toEqual(['RateLimitShutdownError', 'RateLimitShutdownError', 'RateLimitShutdownError']);
      for (const { ms } of ended) expect(ms).toBeLessThan(100);
      expect(exitMs).toBeLessThan(1_000);
    },
    30_000,
  );
});
