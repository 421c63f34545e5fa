import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startRedis, type RedisProcess } from '../support/redis-server';

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
