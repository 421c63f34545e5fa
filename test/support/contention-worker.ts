/**
 * One "app instance" for the contention proofs (test/integration/exactness.redis.spec.ts): builds the
 * store as the module does (`createStore`: RedisStore behind ResilientStore and SheddingStore) on a
 * standalone server or a cluster, reports `{"ready":true}`, waits for a line "go <epoch ms>" on stdin and
 * for that moment (so that every worker starts together), then fires CALLS parallel `consume` calls per algorithm (all algorithms at once, one shared tracker per algorithm) and
 * prints one JSON line `{ "allowed": { <algorithm>: n }, "unavailable": n }`.
 *
 * Env: REDIS_PORT or CLUSTER_NODES (JSON [{host,port}]), CLIENT (ioredis, node-redis or GLIDE; ioredis by default),
 * ALGORITHMS (comma-separated), LIMIT, CALLS, KEY, PREFIX.
 * Run with `node -r ts-node/register/transpile-only test/support/contention-worker.ts` (TS_NODE_SWC=true is faster).
 */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../../lib/interfaces/decision.interface';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { redisClientKind, type NodeAddress } from './redis-clients';
import { readyThenGo } from './worker-go';
import { serviceOver } from './store-chain';

const WAVE = 5;

/** Long windows: nothing refills or rolls over during the race, so exactly `limit` may be admitted. */
export function contentionPolicy(algorithm: RateLimitAlgorithmName, limit: number): RateLimitPolicy {
  return { algorithm, limit, window: '30d', name: `race-${algorithm}` };
}

async function main(): Promise<void> {
  const algorithms = (process.env.ALGORITHMS ?? '').split(',').filter(Boolean) as RateLimitAlgorithmName[];
  const limit = Number(process.env.LIMIT);
  const calls = Number(process.env.CALLS);
  const key = process.env.KEY ?? 'shared';
  const kind = redisClientKind(process.env.CLIENT);
  const client = process.env.CLUSTER_NODES
    ? await kind.connectCluster(JSON.parse(process.env.CLUSTER_NODES) as NodeAddress[])
    : await kind.connect(Number(process.env.REDIS_PORT));
  const registry = new RateLimitAlgorithmRegistry();
  // fail-closed: a fallback can never admit, so every admission below was decided by Redis.
  const options: RateLimitModuleOptions = {
    redis: client,
    prefix: process.env.PREFIX ?? 'rl',
    storeTimeoutMs: 10_000,
    onStoreError: 'fail-closed',
  };
  const { svc: service, store } = serviceOver(options, registry);
  // Load every script on this connection (or every node's) now, so the race is between decisions.
  for (const algorithm of algorithms) await service.peek(contentionPolicy(algorithm, limit), `${key}-${algorithm}`);

  const startAt = Number(await readyThenGo());
  if (startAt - Date.now() > 5) await new Promise((resolve) => setTimeout(resolve, startAt - Date.now() - 5));
  while (Date.now() < startAt) {
    // spin the last few ms for a sharper start
  }

  const allowed: Record<string, number> = {};
  let unavailable = 0;
  await Promise.all(
    algorithms.map(async (algorithm) => {
      const policy = contentionPolicy(algorithm, limit);
      // All calls in flight together, issued in small waves one event-loop turn apart, so that the
      // auto-pipeline sends several batches and the workers' commands interleave at the server.
      const pending: Array<Promise<RateLimitDecision>> = [];
      for (let i = 0; i < calls; i++) {
        if (i > 0 && i % WAVE === 0) await new Promise((resolve) => setImmediate(resolve));
        pending.push(service.consume(policy, `${key}-${algorithm}`));
      }
      const decisions = await Promise.all(pending);
      allowed[algorithm] = decisions.filter((d) => d.allowed).length;
      unavailable += decisions.filter((d) => d.reason === 'store-unavailable').length;
    }),
  );
  process.stdout.write(`${JSON.stringify({ allowed, unavailable })}\n`);
  await store.close();
  await kind.close(client);
  process.stdin.pause();
}

if (require.main === module) {
  main().catch((error) => {
    process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
    process.kill(process.pid, 'SIGTERM'); // fail now, even with connections still open
  });
}
