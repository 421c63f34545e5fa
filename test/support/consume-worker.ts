/**
 * A separate "app process" for the multi-process tests: connects to Redis, reports ready, waits for "go" on
 * stdin, then fires CALLS parallel `consume` calls per algorithm on one shared key and prints a JSON line
 * `{ "allowed": { <algorithm>: <count> }, "now": <Date.now()> }`.
 *
 * Env: REDIS_PORT, CLIENT (ioredis, node-redis or GLIDE; ioredis by default), ALGORITHMS (comma-separated), LIMIT,
 * WINDOW_MS, CALLS, KEY, PREFIX,
 * DATE_OFFSET_MS (this process's clock is skewed by that much, installed before the library loads).
 * Run with `node -r ts-node/register/transpile-only test/support/consume-worker.ts`.
 */
const offset = Number(process.env.DATE_OFFSET_MS ?? 0);
if (offset !== 0) {
  const realNow = Date.now.bind(Date);
  Date.now = () => realNow() + offset;
}

/* eslint-disable @typescript-eslint/no-require-imports */
async function main(): Promise<void> {
  // Loaded only after the clock is patched.
  const { redisClientKind } = require('./redis-clients') as typeof import('./redis-clients');
  const { readyThenGo } = require('./worker-go') as typeof import('./worker-go');
  const { RateLimitAlgorithmRegistry } =
    require('../../lib/algorithms/algorithm.registry') as typeof import('../../lib/algorithms/algorithm.registry');
  const { RedisStore } = require('../../lib/stores/redis/redis.store') as typeof import('../../lib/stores/redis/redis.store');
  const { RateLimitEngine } = require('../../lib/pipeline/rate-limit.engine') as typeof import('../../lib/pipeline/rate-limit.engine');
  const { RateLimiterService } = require('../../lib/rate-limiter.service') as typeof import('../../lib/rate-limiter.service');
  type Name = import('../../lib/interfaces/policy.interface').RateLimitAlgorithmName;

  const algorithms = (process.env.ALGORITHMS ?? '').split(',').filter(Boolean) as Name[];
  const limit = Number(process.env.LIMIT);
  const windowMs = Number(process.env.WINDOW_MS);
  const calls = Number(process.env.CALLS);
  const key = process.env.KEY ?? 'shared';

  const kind = redisClientKind(process.env.CLIENT);
  const client = await kind.connect(Number(process.env.REDIS_PORT));
  const registry = new RateLimitAlgorithmRegistry();
  const store = new RedisStore(client, registry.all(), false);
  const service = new RateLimiterService(new RateLimitEngine(store), registry, { prefix: process.env.PREFIX ?? 'rl' });
  // Load the scripts now, so the race below is between decisions, not script loads.
  for (const algorithm of algorithms) await service.peek({ algorithm, limit, window: windowMs, name: 'warmup' }, `${key}-warmup`);

  await readyThenGo();

  const allowed: Record<string, number> = {};
  await Promise.all(
    algorithms.map(async (algorithm) => {
      const policy = { algorithm, limit, window: windowMs, name: 'shared' };
      const decisions = await Promise.all(Array.from({ length: calls }, () => service.consume(policy, key)));
      allowed[algorithm] = decisions.filter((d) => d.allowed).length;
    }),
  );
  process.stdout.write(`${JSON.stringify({ allowed, now: Date.now() })}\n`);
  await store.close();
  await kind.close(client);
  process.stdin.pause();
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.kill(process.pid, 'SIGTERM'); // fail now, even with connections still open
});
