/**
 * The contenders of bench/decisions.ts and the scenarios they run in. Every peer runs in its best
 * documented setting: rate-limiter-flexible both with a plain ioredis client (its README) and with
 * auto-pipelining, the better of the two in each cell and round being the reference ("× best peer").
 */
import type { Cluster, Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RateLimiterService } from '../../lib';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { createStore } from '../../lib/pipeline/create-store';
import type { Decide } from './decision-cell';
import { selected } from './settings';

export const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
/** Allow-all limit: never reached within a run (limit × window stays under the 2^50 the engine accepts). */
export const BIG = 1_000_000_000;
const WINDOW_S = 60;
/** Trackers each algorithm decides for in the "app using all seven" variants before timing starts. */
const ALL_SEVEN_WARM_UP = 10_000;
/** Windows of the policies of a multi-policy decision (s): limit × window stays under 2^50 with {@link BIG}. */
const POLICY_WINDOWS_S = [60, 1, 10, 30, 5, 20, 2, 45];

export const RLF = 'rlf RateLimiterRedis';
export const RLF_AUTO = 'rlf RateLimiterRedis (auto-pipelined client)';
export const RLF_BLOCK = 'rlf RateLimiterRedis + inMemoryBlock';
export const RLF_MEMORY = 'rlf RateLimiterMemory';
export const INCR = 'ioredis INCR (floor)';
export const BARE_STORE = 'fixed-window on a bare RedisStore (no resilience nor shedding)';
export const INLINE = 'fixed-window (inline policy object)';

/** Where a scenario's Redis commands go. */
export type Deployment = 'standalone' | 'cluster';

export interface ScenarioSpec {
  title: string;
  deployment: Deployment;
  /** Distinct trackers the callers walk through (1 = one hot key). */
  keys: number;
  /** Policies per decision: ours decides them atomically (`consumeAll`), rlf with one limiter each. */
  policies: number;
  /** Whether the hot key is over its limit (and, for rlf's in-memory block, blocked) before timing. */
  rejecting?: boolean;
  /** Our Redis store with `batchDecisions: false`: one script call per decision. */
  unbatched?: boolean;
}

/** Every scenario, in the order they run and are reported. */
export const SCENARIO_NAMES = ['keys', 'keys-1m', 'hot-allow', 'hot-reject', 'policies-2', 'policies-8', 'unbatched', 'cluster'] as const;
export type Scenario = (typeof SCENARIO_NAMES)[number];

export const SCENARIOS: Record<Scenario, ScenarioSpec> = {
  keys: { title: '10k keys, allowing', deployment: 'standalone', keys: 10_000, policies: 1 },
  'keys-1m': {
    title:
      '1M keys, allowing: each cell walks a space of 1M trackers from a random point, so nearly every decision is for a tracker this process has not seen for a long time and a key Redis creates (Redis is flushed before each cell, not filled with 1M keys)',
    deployment: 'standalone',
    keys: 1_000_000,
    policies: 1,
  },
  'hot-allow': { title: 'One hot key, allowing', deployment: 'standalone', keys: 1, policies: 1 },
  'hot-reject': { title: 'One hot key, rejecting', deployment: 'standalone', keys: 1, policies: 1, rejecting: true },
  'policies-2': {
    title:
      '2 policies per decision, 10k keys, allowing (ours: `consumeAll`, atomic; rlf: 2 limiters, `Promise.all` of their `consume`, not atomic)',
    deployment: 'standalone',
    keys: 10_000,
    policies: 2,
  },
  'policies-8': {
    title:
      '8 policies per decision, 10k keys, allowing (ours: `consumeAll`, atomic; rlf: 8 limiters, `Promise.all` of their `consume`, not atomic)',
    deployment: 'standalone',
    keys: 10_000,
    policies: 8,
  },
  unbatched: {
    title: '`batchDecisions: false` (one script call per decision, as behind a proxy that routes by first key), 10k keys, allowing',
    deployment: 'standalone',
    keys: 10_000,
    policies: 1,
    unbatched: true,
  },
  cluster: {
    title: 'Redis Cluster of 3 masters (one call per master and turn), 10k keys, allowing',
    deployment: 'cluster',
    keys: 10_000,
    policies: 1,
  },
};

/**
 * What a variant is compared with: `peer` rows make the "best peer" of a cell (the fastest of them in each
 * round), `ours` and `floor` rows are divided by it; `memory` rows by `memory-peer` (rlf's in-process
 * limiter).
 */
export type Role = 'peer' | 'ours' | 'floor' | 'memory-peer' | 'memory';

export interface Variant {
  name: string;
  role: Role;
  /** The scenarios it runs in. */
  scenarios: readonly Scenario[];
  /** Builds a fresh decider for `limit` (state is flushed between cells). */
  make(limit: number, scenario: ScenarioSpec): Decide;
}

/** The clients of one deployment; each library has its own connection(s). */
export interface Clients {
  /** Ours: auto-pipelining, as the module sets up a client it creates from a URL. */
  ours: Redis | Cluster;
  /** rate-limiter-flexible as its README shows (no auto-pipelining, no offline queue), and auto-pipelined. */
  rlfPlain: Redis | Cluster;
  rlfAuto: Redis | Cluster;
  incr: Redis | Cluster;
}

/** rate-limiter-flexible rejects with a RateLimiterRes (not an Error) when limited: an answer. */
function rlfDecider(limiter: RateLimiterAbstract): Decide {
  return (key) =>
    limiter.consume(key).catch((res: unknown) => {
      if (res instanceof Error) throw res;
      return res;
    });
}

/** One rlf limiter per policy, all asked at once, as a user without an atomic multi-policy call writes it. */
function rlfPolicies(client: Redis | Cluster, points: number, scenario: ScenarioSpec): Decide {
  if (scenario.policies === 1) return rlfDecider(new RateLimiterRedis({ storeClient: client, points, duration: WINDOW_S }));
  const deciders = POLICY_WINDOWS_S.slice(0, scenario.policies).map((duration, i) =>
    rlfDecider(new RateLimiterRedis({ storeClient: client, points, duration, keyPrefix: `rlf${i}` })),
  );
  return (key) => Promise.all(deciders.map((decide) => decide(key)));
}

function policiesOf(algorithm: RateLimitAlgorithmName, limit: number, count: number): RateLimitPolicy[] {
  return POLICY_WINDOWS_S.slice(0, count).map((seconds, i) => ({ algorithm, limit, window: seconds * 1000, name: `p${i}` }));
}

/** Our decisions through the service: one policy (`consume`) or several at once (`consumeAll`). */
function oursDecider(service: RateLimiterService, algorithm: RateLimitAlgorithmName, limit: number, scenario: ScenarioSpec): Decide {
  const policies = policiesOf(algorithm, limit, scenario.policies);
  if (policies.length > 1) return (key) => service.consumeAll(policies, key);
  const [policy] = policies;
  return (key) => service.consume(policy, key);
}

const standaloneRedis: Scenario[] = ['keys', 'keys-1m', 'hot-allow', 'hot-reject', 'policies-2', 'policies-8', 'unbatched'];

/** Every variant of a deployment, filtered by BENCH_ONLY. */
export function variantsFor(deployment: Deployment, clients: Clients): Variant[] {
  const registry = new RateLimitAlgorithmRegistry();
  const service = (store: RateLimitStore) => new RateLimiterService(new RateLimitEngine(store), registry, { prefix: 'rl' });
  // What RateLimitModule builds for a client of yours: RedisStore behind ResilientStore (deadline, fallback)
  // and SheddingStore (hot-key shedding). A long deadline: a stalled box must not turn decisions into
  // fallbacks that never reach Redis.
  const stack = (batchDecisions: boolean) =>
    service(createStore({ redis: clients.ours, storeTimeoutMs: 10_000, batchDecisions }, registry));
  const batched = stack(true);
  const list: Variant[] = [];
  const onRedis: readonly Scenario[] = deployment === 'cluster' ? ['cluster'] : standaloneRedis;
  list.push({
    name: INCR,
    role: 'floor',
    scenarios: onRedis.filter((s) => SCENARIOS[s].policies === 1),
    make: () => (key) => clients.incr.incr(`incr:${key}`),
  });
  list.push({ name: RLF, role: 'peer', scenarios: onRedis, make: (points, scenario) => rlfPolicies(clients.rlfPlain, points, scenario) });
  list.push({
    name: RLF_AUTO,
    role: 'peer',
    scenarios: onRedis,
    make: (points, scenario) => rlfPolicies(clients.rlfAuto, points, scenario),
  });
  if (deployment === 'standalone') {
    list.push({
      name: RLF_BLOCK,
      role: 'peer',
      scenarios: ['hot-reject'],
      make: (points) =>
        rlfDecider(
          new RateLimiterRedis({
            storeClient: clients.rlfPlain,
            points,
            duration: WINDOW_S,
            inMemoryBlockOnConsumed: points + 1,
            inMemoryBlockDuration: WINDOW_S,
          }),
        ),
    });
  }
  const unbatched = deployment === 'standalone' ? stack(false) : batched;
  for (const algorithm of ALGORITHMS) {
    list.push({
      name: algorithm,
      role: 'ours',
      scenarios: onRedis,
      make: (limit, scenario) => oursDecider(scenario.unbatched ? unbatched : batched, algorithm, limit, scenario),
    });
  }
  if (deployment === 'cluster') return list.filter((v) => selected(v.name));

  const bareRedisStore = service(new RedisStore(clients.ours as Redis, registry.all(), false));
  list.push({
    name: BARE_STORE,
    role: 'ours',
    scenarios: ['keys', 'hot-allow', 'hot-reject'],
    make: (limit, scenario) => oursDecider(bareRedisStore, 'fixed-window', limit, scenario),
  });
  list.push({
    name: INLINE,
    role: 'ours',
    scenarios: ['keys', 'keys-1m'],
    // A new policy object per call, as the service's JSDoc writes it: compiled once, found by content.
    make: (limit) => (key) => batched.consume({ algorithm: 'fixed-window', limit, window: WINDOW_S * 1000 }, key),
  });
  const inProcess: Scenario[] = ['keys', 'keys-1m', 'hot-allow', 'hot-reject'];
  list.push({
    name: RLF_MEMORY,
    role: 'memory-peer',
    scenarios: inProcess,
    make: (points) => rlfDecider(new RateLimiterMemory({ points, duration: WINDOW_S })),
  });
  for (const algorithm of ['fixed-window', 'gcra', 'token-bucket'] as const) {
    list.push({
      name: `memory store: ${algorithm}`,
      role: 'memory',
      scenarios: inProcess,
      make: (limit, scenario) => oursDecider(service(new MemoryStore({ maxKeys: 1_000_000 })), algorithm, limit, scenario),
    });
    list.push({
      name: `memory store: ${algorithm} (app using all seven)`,
      role: 'memory',
      scenarios: ['keys', 'keys-1m'],
      make: (limit, scenario) => {
        // An app whose routes use every algorithm: the same service has decided with each of them, on the
        // same trackers, before this one is timed (so its call sites have seen all seven).
        const mixed = service(new MemoryStore({ maxKeys: 1_000_000 }));
        for (const other of ALGORITHMS) {
          const warm = oursDecider(mixed, other, BIG, scenario);
          for (let i = 0; i < ALL_SEVEN_WARM_UP; i++) void warm(`user${i}`);
        }
        return oursDecider(mixed, algorithm, limit, scenario);
      },
    });
  }
  return list.filter((v) => selected(v.name));
}
