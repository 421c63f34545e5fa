import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitShutdownError, RateLimitWaitError } from '../../lib/errors/rate-limit-wait.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { libraryClient, startRedis, type RedisProcess } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
const LIMIT = 5;
const WINDOW_MS = 500;
const PROCESSES = 3;
const CALLS = 6;

let redis: RedisProcess;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** Runs PROCESSES acquire-workers at once and returns every grant's server time, sorted. */
async function grantsFromWorkers(algorithm: string): Promise<number[]> {
  const env = { ...process.env, TS_NODE_PROJECT: join(ROOT, 'tsconfig.json'), REDIS_PORT: String(redis.port), ALGORITHM: algorithm };
  const workers = Array.from({ length: PROCESSES }, () =>
    run(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, '..', 'support', 'acquire-worker.ts')], {
      cwd: ROOT,
      env: { ...env, LIMIT: String(LIMIT), WINDOW_MS: String(WINDOW_MS), CALLS: String(CALLS), PREFIX: `acq-${algorithm}` },
      timeout: 60_000,
    }),
  );
  const outputs = await Promise.all(workers);
  return outputs
    .flatMap(({ stdout }) => (JSON.parse(stdout.trim().split('\n').pop()!) as { grants: number[] }).grants)
    .sort((a, b) => a - b);
}

describe('acquire: processes sharing one partner quota through Redis', () => {
  it('sliding-log: every call is granted, and no window of the quota ever holds more than the limit', async () => {
    const grants = await grantsFromWorkers('sliding-log');
    expect(grants).toHaveLength(PROCESSES * CALLS);
    for (let i = LIMIT; i < grants.length; i++) {
      // The (LIMIT+1)-th grant after grant i-LIMIT must fall outside its window (t − W, t].
      expect(grants[i] - grants[i - LIMIT]).toBeGreaterThanOrEqual(WINDOW_MS);
    }
  }, 60_000);

  it('leaky-bucket: calls proceed one emission interval apart, whichever process made them', async () => {
    const grants = await grantsFromWorkers('leaky-bucket');
    expect(grants).toHaveLength(PROCESSES * CALLS);
    const interval = WINDOW_MS / LIMIT;
    for (let i = 1; i < grants.length; i++) expect(grants[i] - grants[i - 1]).toBeGreaterThanOrEqual(interval - 1);
  }, 60_000);
});

describe('acquire: 10,000 calls in one turn on a spent quota in Redis', () => {
  it('the first 1,000 (maxWaiters) wait and only their head asks Redis; the 9,000 after them are refused at once', async () => {
    const client = await libraryClient(redis.url);
    const { svc, store } = serviceOver({ redis: client, prefix: 'acq-burst' }, new RateLimitAlgorithmRegistry());
    const slow: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: '10s', name: 'partner' };
    try {
      expect((await svc.consume(slow, 'partner-api')).allowed).toBe(true);
      let consumes = 0;
      const decide = store.decide.bind(store);
      store.decide = (calls, mode) => {
        if (mode === 'consume') consumes++;
        return decide(calls, mode);
      };
      const outcomes: Array<[number, RateLimitWaitError | 'granted']> = [];
      const calls = Array.from({ length: 10_000 }, (_, i) =>
        svc.acquire(slow, 'partner-api').then(
          () => void outcomes.push([i, 'granted']),
          (error: RateLimitWaitError) => void outcomes.push([i, error]),
        ),
      );
      // Every refusal is delivered before the head's answer can come back from Redis.
      await new Promise((resolve) => setImmediate(resolve));
      expect(outcomes.map(([i]) => i)).toEqual(Array.from({ length: 9_000 }, (_, i) => 1_000 + i));
      const full = "acquire: 1000 calls of this process already wait for 'partner-api' under policy 'partner' (maxWaiters 1000).";
      const unlike = outcomes.filter(
        ([, error]) => !(error instanceof RateLimitWaitError) || error.message !== full || error.retryAfterMs !== 0,
      );
      expect(unlike).toEqual([]);
      expect(new Set(outcomes.map(([, error]) => error)).size).toBe(9_000);
      expect(svc.waiting(slow, 'partner-api')).toBe(1_000);
      // The head's answer (retry in 10 s) leaves the 1,000 waiting, and no other call asked.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(svc.waiting(slow, 'partner-api')).toBe(1_000);
      expect(consumes).toBe(1);
      svc.beforeApplicationShutdown();
      await Promise.all(calls);
      const ended = outcomes.slice(9_000);
      expect(ended.map(([i]) => i)).toEqual(Array.from({ length: 1_000 }, (_, i) => i));
      expect(ended.every(([, error]) => error instanceof RateLimitShutdownError)).toBe(true);
    } finally {
      await store.close();
      client.disconnect();
    }
  }, 30_000);
});
