/**
 * A separate "app process" for reserve.redis.spec.ts: connects to Redis (ioredis, the library's RedisStore and
 * RateLimiterService), reports ready, waits for "go" on stdin, then, per algorithm and shape (`one`: `consume`
 * of the reserve policy, the one-policy script or decide.lua's lean path; `two`: `consumeAll` with a second,
 * generous policy, decide.lua's general path), on one key shared by every worker, makes CALLS 'default' and
 * CALLS 'critical' calls:
 *  - ORDER=phased: the 'default' calls at once, then, once every worker's are done (a counter in Redis is the
 *    barrier: WORKERS increments), the 'critical' ones at once;
 *  - ORDER=interleaved: all of them at once, 'default' and 'critical' alternating.
 * Prints `{ "counts": { "<algorithm>/<shape>": { default: Tally, critical: Tally } } }`, a Tally counting the
 * calls allowed, refused by the reserve (reason 'reserved') and refused by the plain limit (no reason).
 * Env: REDIS_PORT, PREFIX, ORDER, WORKERS, CALLS.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../../lib/interfaces/decision.interface';
import type { RateLimitCriticality } from '../../lib/interfaces/overload.interface';
import { RATE_LIMIT_ALGORITHMS, type RateLimitAlgorithmName, type RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { readyThenGo } from './worker-go';

/** What one kind of call met. */
export interface ReserveTally {
  allowed: number;
  reserved: number;
  limited: number;
}

export interface ReserveWorkerResult {
  counts: Record<string, Record<'default' | 'critical', ReserveTally>>;
}

/** Capacity 100, 20 % kept for critical calls; windows long enough that nothing refills during the race. */
export function reservePolicy(algorithm: RateLimitAlgorithmName): RateLimitPolicy {
  return { algorithm, name: 'quota', limit: 100, window: algorithm === 'concurrency' ? '10m' : '1d', reserve: { critical: 0.2 } };
}

const OUTER: RateLimitPolicy = { algorithm: 'fixed-window', name: 'outer', limit: 10_000, window: '1d' };

async function main(): Promise<void> {
  const calls = Number(process.env.CALLS);
  const workers = Number(process.env.WORKERS);
  const prefix = process.env.PREFIX!;
  const client = new Redis(Number(process.env.REDIS_PORT), { lazyConnect: true });
  await client.connect();
  const registry = new RateLimitAlgorithmRegistry();
  const store = new RedisStore(client, registry.all(), false);
  const service = new RateLimiterService(new RateLimitEngine(store), registry, { prefix });
  // Load the scripts now, so the race is between decisions, not script loads.
  for (const algorithm of RATE_LIMIT_ALGORITHMS) {
    await service.peek(reservePolicy(algorithm), 'warmup');
    await service.consumeAll([{ ...reservePolicy(algorithm), name: 'w' }, OUTER], 'warmup', { cost: 0 });
  }

  const decide = (algorithm: RateLimitAlgorithmName, shape: string, priority: RateLimitCriticality): Promise<RateLimitDecision> => {
    const key = `${algorithm}-${shape}`;
    if (shape === 'one') return service.consume(reservePolicy(algorithm), key, { priority });
    return service.consumeAll([reservePolicy(algorithm), OUTER], key, { priority }).then((d) => d.decisions[0]);
  };
  const runs = RATE_LIMIT_ALGORITHMS.flatMap((algorithm) => ['one', 'two'].map((shape) => ({ algorithm, shape })));
  const counts: ReserveWorkerResult['counts'] = {};
  const tally = (algorithm: string, shape: string, priority: 'default' | 'critical', d: RateLimitDecision) => {
    const entry = (counts[`${algorithm}/${shape}`] ??= {
      default: { allowed: 0, reserved: 0, limited: 0 },
      critical: { allowed: 0, reserved: 0, limited: 0 },
    });
    const t = entry[priority];
    if (d.allowed) t.allowed++;
    else if (d.reason === 'reserved') t.reserved++;
    else if (d.reason === undefined) t.limited++;
    else throw new Error(`unexpected refusal: ${JSON.stringify(d)}`);
  };
  const fire = (priorities: ReadonlyArray<'default' | 'critical'>) =>
    Promise.all(
      runs.flatMap(({ algorithm, shape }) =>
        priorities.map((priority) => decide(algorithm, shape, priority).then((d) => tally(algorithm, shape, priority, d))),
      ),
    );

  await readyThenGo();

  if (process.env.ORDER === 'phased') {
    await fire(Array.from({ length: calls }, () => 'default' as const));
    const barrier = `${prefix}:barrier`;
    await client.incr(barrier);
    while (Number(await client.get(barrier)) < workers) await new Promise((resolve) => setTimeout(resolve, 5));
    await fire(Array.from({ length: calls }, () => 'critical' as const));
  } else {
    await fire(Array.from({ length: 2 * calls }, (_, i) => (i % 2 === 0 ? 'default' : 'critical')));
  }
  process.stdout.write(`${JSON.stringify({ counts })}\n`);
  await store.close();
  client.disconnect();
  process.stdin.pause();
}

main().catch((error) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.kill(process.pid, 'SIGTERM'); // fail now, even with connections still open
});
