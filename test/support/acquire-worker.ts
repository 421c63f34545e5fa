/**
 * One "app process" throttling its outbound calls: fires CALLS concurrent `acquire` calls for one shared
 * partner quota and prints `{ "grants": [<server ms the call may proceed at>, …] }`. The server time comes
 * from the store decision itself, so the parent can check the quota across processes exactly.
 * Env: REDIS_PORT, ALGORITHM, LIMIT, WINDOW_MS, CALLS, PREFIX.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithmName } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { DecisionMode, RateLimitCall } from '../../lib/stores/store.interface';

async function main(): Promise<void> {
  const client = new Redis({ port: Number(process.env.REDIS_PORT), enableAutoPipelining: true });
  const registry = new RateLimitAlgorithmRegistry();
  const store = new RedisStore(client, registry.all(), true);
  const grants: number[] = [];
  const decide = store.decide.bind(store);
  store.decide = async (calls: readonly RateLimitCall[], mode: DecisionMode) => {
    const result = await decide(calls, mode);
    if (mode === 'consume' && result.allowed) grants.push(result.nowMs + result.verdicts[0].delayMs);
    return result;
  };
  const service = new RateLimiterService(new RateLimitEngine(store), registry, { prefix: process.env.PREFIX });
  const policy = {
    algorithm: process.env.ALGORITHM as RateLimitAlgorithmName,
    limit: Number(process.env.LIMIT),
    window: Number(process.env.WINDOW_MS),
    scope: 'partner',
  };
  const calls = Array.from({ length: Number(process.env.CALLS) }, () => service.acquire(policy, 'partner-api', { maxWaitMs: 30_000 }));
  await Promise.all(calls);
  await store.close();
  process.stdout.write(`${JSON.stringify({ grants })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${String((error as Error)?.stack ?? error)}\n`);
  process.kill(process.pid, 'SIGTERM'); // fail now, even with connections still open
});
