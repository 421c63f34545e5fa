/**
 * One "app process" calling a rate-limited partner through one shared quota: connects to Redis (REDIS_PORT)
 * or a Redis Cluster (CLUSTER_PORTS, comma-separated), prints `{"ready":true}`, waits for "go" on stdin, then
 * starts CALLS calls at once and prints one JSON line (see {@link WorkerReport}).
 *
 * MODE=acquire (default): each call is `acquire(policy, 'partner', { maxWaitMs: MAX_WAIT_MS })`.
 * MODE=fetch: each call is a `wrapFetch` of PARTNER_URL, sent with an `x-worker: WORKER` header; after a
 * response that paused the key, the worker peeks once to learn when the pause ends on the store's clock.
 *
 * Grants are timed by the store itself (the decision's server time), so the parent checks them exactly.
 * Env: REDIS_PORT | CLUSTER_PORTS, PREFIX, ALGORITHM, LIMIT, WINDOW_MS, CALLS, MAX_WAIT_MS, MODE, PARTNER_URL, WORKER.
 */
import { Cluster, Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { DecisionMode, RateLimitCall } from '../../lib/stores/store.interface';
import { readyThenGo } from './worker-go';

/** How one call ended: `granted`, or the error's name; `ms` from "go" to its end. */
export interface CallOutcome {
  outcome: string;
  ms: number;
  /** MODE=fetch: the partner's status. */
  status?: number;
}

/** What a worker prints. */
export interface WorkerReport {
  /** Server ms of every grant this process got (when the store admitted it, plus any leaky-bucket delay). */
  grants: number[];
  calls: CallOutcome[];
  /** MODE=fetch: server ms at which each pause this process saw in a response ends. */
  pausesUntil: number[];
}

async function main(): Promise<void> {
  const clusterPorts = process.env.CLUSTER_PORTS?.split(',').map(Number);
  const client = clusterPorts
    ? new Cluster(clusterPorts.map((port) => ({ host: '127.0.0.1', port })))
    : new Redis({ port: Number(process.env.REDIS_PORT), enableAutoPipelining: true });
  const registry = new RateLimitAlgorithmRegistry();
  const store = new RedisStore(client, registry.all(), true);
  const grants: number[] = [];
  const pausesUntil: number[] = [];
  let going = false;
  const decide = store.decide.bind(store);
  store.decide = async (calls: readonly RateLimitCall[], mode: DecisionMode) => {
    const result = await decide(calls, mode);
    if (mode === 'consume' && result.allowed) grants.push(result.nowMs + result.verdicts[0].delayMs);
    // MODE=fetch peeks only after a 429: the lockout it reports ends at its server time plus its wait.
    if (mode === 'peek' && going) pausesUntil.push(result.nowMs + result.verdicts[0].retryAfterMs);
    return result;
  };
  const limiter = new RateLimiterService(new RateLimitEngine(store), registry, { prefix: process.env.PREFIX });
  const policy: RateLimitPolicy = {
    algorithm: process.env.ALGORITHM as RateLimitAlgorithmName,
    limit: Number(process.env.LIMIT),
    window: Number(process.env.WINDOW_MS),
    scope: 'partner',
  };
  // Load the scripts before the race, so the calls race each other and not a script load.
  await limiter.peek(policy, 'warmup');
  await readyThenGo();

  going = true;
  const started = performance.now();
  const maxWaitMs = Number(process.env.MAX_WAIT_MS ?? 30_000);
  const call = process.env.MODE === 'fetch' ? fetchCall() : () => limiter.acquire(policy, 'partner', { maxWaitMs }).then(() => ({}));
  const calls = await Promise.all(
    Array.from({ length: Number(process.env.CALLS) }, () =>
      call().then(
        (extra): CallOutcome => ({ outcome: 'granted', ms: performance.now() - started, ...extra }),
        (error: Error): CallOutcome => ({ outcome: error.name, ms: performance.now() - started }),
      ),
    ),
  );
  await store.close();
  process.stdin.pause();
  const report: WorkerReport = { grants, calls, pausesUntil };
  process.stdout.write(`${JSON.stringify(report)}\n`);

  function fetchCall(): () => Promise<{ status: number }> {
    const partnerFetch = limiter.wrapFetch(policy, 'partner', fetch, { maxWaitMs });
    const headers = { 'x-worker': process.env.WORKER ?? '' };
    return async () => {
      const response = await partnerFetch(process.env.PARTNER_URL!, { headers });
      await response.arrayBuffer();
      // The pause is in force once the wrapped call resolves: a peek reports when it ends (see store.decide above).
      if (response.status === 429) await limiter.peek(policy, 'partner');
      return { status: response.status };
    };
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${String((error as Error)?.stack ?? error)}\n`);
  process.kill(process.pid, 'SIGTERM'); // fail now, even with connections still open
});
