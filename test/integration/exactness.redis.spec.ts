/**
 * Exactness under contention: 4 Node processes × 100 parallel calls on one tracker, limit 60 → exactly 60
 * admitted, for every algorithm (long windows, so nothing refills during the race), on a standalone
 * redis-server and on a real 3-master Redis Cluster. Each worker builds its store as the module does
 * (createStore, fail-closed so that a fallback could never admit) and runs all algorithms at once, one
 * tracker per algorithm. Once per client library (ioredis, node-redis, Valkey GLIDE), with the same assertions.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { REDIS_CLIENTS } from '../support/redis-clients';
import { startRedis, startRedisCluster, type RedisClusterProcess, type RedisProcess } from '../support/redis-server';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const WORKERS = 4;
const CALLS = 100;
const LIMIT = 60;
const ROOT = join(__dirname, '..', '..');

interface WorkerResult {
  allowed: Record<string, number>;
  unavailable: number;
}

let redis: RedisProcess | undefined;
let cluster: RedisClusterProcess | undefined;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  [redis, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
}, 60_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await redis?.stop();
  await cluster?.stop();
});

/** Starts one worker; resolves once it is connected and has loaded its scripts. */
function startWorker(env: Record<string, string>): Promise<{ go(at: number): void; result: Promise<WorkerResult> }> {
  return new Promise((resolveReady, rejectReady) => {
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(ROOT, 'test/support/contention-worker.ts')], {
      cwd: ROOT,
      env: {
        ...process.env,
        TS_NODE_SWC: 'true',
        TS_NODE_PROJECT: join(ROOT, 'tsconfig.json'),
        ALGORITHMS: ALGORITHMS.join(','),
        LIMIT: String(LIMIT),
        CALLS: String(CALLS),
        ...env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.add(child);
    let out = '';
    let err = '';
    let settle: ((r: WorkerResult) => void) | undefined;
    let fail: ((e: Error) => void) | undefined;
    const result = new Promise<WorkerResult>((resolve, reject) => {
      settle = resolve;
      fail = reject;
    });
    result.catch(() => undefined);
    child.stderr!.on('data', (chunk) => (err += String(chunk)));
    child.stdout!.on('data', (chunk) => {
      out += String(chunk);
      const lines = out.split('\n');
      out = lines.pop() ?? '';
      for (const line of lines) {
        // Anything else on stdout (a log line) is kept for the error message.
        if (!line.startsWith('{')) {
          err += `${line}\n`;
          continue;
        }
        const message = JSON.parse(line) as { ready?: boolean } & Partial<WorkerResult>;
        if (message.ready) resolveReady({ go: (at) => child.stdin!.write(`go ${at}\n`), result });
        else if (message.allowed) settle!(message as WorkerResult);
      }
    });
    child.on('exit', (code, signal) => {
      children.delete(child);
      const error = new Error(`contention worker exited with ${code ?? signal}: ${err}`);
      if (code !== 0) {
        rejectReady(error);
        fail!(error);
      }
    });
  });
}

async function race(
  env: Record<string, string>,
): Promise<{ totals: Record<string, number>; perWorker: Array<Record<string, number>>; unavailable: number }> {
  const workers = await Promise.all(Array.from({ length: WORKERS }, () => startWorker(env)));
  const at = Date.now() + 200;
  for (const worker of workers) worker.go(at);
  const results = await Promise.all(workers.map((w) => w.result));
  const totals: Record<string, number> = {};
  for (const r of results) for (const [algorithm, n] of Object.entries(r.allowed)) totals[algorithm] = (totals[algorithm] ?? 0) + n;
  return { totals, perWorker: results.map((r) => r.allowed), unavailable: results.reduce((sum, r) => sum + r.unavailable, 0) };
}

/**
 * How each worker's admissions split, shown beside the totals when they are wrong (and only then: a log
 * line per test would push jest's failure text out of a CI log cut to a window).
 */
function perWorkerSummary(perWorker: Array<Record<string, number>>): string {
  return perWorker.map((w) => Object.values(w).join('/')).join(' | ');
}

const expected = Object.fromEntries(ALGORITHMS.map((a) => [a, LIMIT]));

describe.each(REDIS_CLIENTS)(`$name, exactness: ${WORKERS} processes × ${CALLS} parallel calls, limit ${LIMIT}`, ({ name }) => {
  it('standalone redis-server: exactly 60 admitted for every algorithm', async () => {
    const { totals, perWorker, unavailable } = await race({
      REDIS_PORT: String(redis!.port),
      CLIENT: name,
      KEY: `${name}-standalone`,
      PREFIX: 'race',
    });
    expect({ totals, unavailable, perWorker: perWorkerSummary(perWorker) }).toEqual({
      totals: expected,
      unavailable: 0,
      perWorker: perWorkerSummary(perWorker),
    });
  }, 60_000);

  it('3-master Redis Cluster: exactly 60 admitted for every algorithm', async () => {
    const { totals, perWorker, unavailable } = await race({
      CLUSTER_NODES: JSON.stringify(cluster!.startupNodes),
      CLIENT: name,
      KEY: `${name}-cluster`,
      PREFIX: 'race',
    });
    expect({ totals, unavailable, perWorker: perWorkerSummary(perWorker) }).toEqual({
      totals: expected,
      unavailable: 0,
      perWorker: perWorkerSummary(perWorker),
    });
  }, 60_000);
});
