/**
 * Decisions per second without HTTP: each of our algorithms (RateLimiterService on the module's Redis store
 * stack) against rate-limiter-flexible's RateLimiterRedis in its best documented setting (a plain ioredis
 * client, as its README shows, and an auto-pipelined one: the faster of the two in each cell is the
 * reference), with a plain ioredis INCR as the floor; plus the in-process stores (ours and
 * RateLimiterMemory) for scale. Scenarios (see SCENARIOS): 10k keys, 1M keys, one hot key allowing and
 * rejecting, 2 and 8 policies per decision, `batchDecisions: false`, and a 3-master Redis Cluster.
 * Closed loop: `concurrency` callers each await one decision then start the next, for a fixed time; every
 * cell's variants run interleaved, round after round.
 *
 *   npm run bench:decisions      (BENCH_ROUNDS, BENCH_DECISION_MS, BENCH_DECISION_SCENARIOS, BENCH_ONLY, BENCH_QUICK)
 */
import { Cluster, Redis } from 'ioredis';
import { OWNED_CLIENT_DEFAULTS } from '../lib/pipeline/create-store';
import { libraryCluster, startRedisCluster, type RedisClusterProcess } from '../test/support/redis-server';
import { fallbackCount, runCell, walk, type Decide } from './support/decision-cell';
import { CONCURRENCIES, DecisionResults, report } from './support/decision-report';
import {
  BIG,
  SCENARIO_NAMES,
  SCENARIOS,
  variantsFor,
  type Clients,
  type Deployment,
  type Scenario,
  type Variant,
} from './support/decision-variants';
import { benchRedis } from './support/redis';
import { settings } from './support/settings';

/** The scenarios BENCH_DECISION_SCENARIOS names (all by default), in SCENARIOS order. */
function chosenScenarios(): Scenario[] {
  const all: readonly Scenario[] = SCENARIO_NAMES;
  const raw = process.env.BENCH_DECISION_SCENARIOS;
  if (!raw) return [...all];
  const wanted = raw.split(',').map((s) => s.trim());
  const unknown = wanted.filter((s) => !all.includes(s as Scenario));
  if (unknown.length > 0) throw new Error(`BENCH_DECISION_SCENARIOS: unknown ${unknown.join(', ')}; known: ${all.join(', ')}.`);
  return all.filter((s) => wanted.includes(s));
}

/** One deployment's servers, clients and variants. */
interface Environment {
  deployment: Deployment;
  /** One connection per master, for FLUSHALL and INFO. */
  admins: Redis[];
  variants: Variant[];
  close(): Promise<void>;
}

/** Resolves once a client is connected (a client without an offline queue fails commands until then). */
function ready(client: Redis | Cluster): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    client.once('ready', () => resolve());
    setTimeout(() => reject(new Error('bench: a Redis client did not connect within 10 s')), 10_000).unref();
  });
}

async function standalone(): Promise<Environment> {
  const redis = await benchRedis();
  const port = redis.port;
  const clients: Clients = {
    // As the module creates it from a URL.
    ours: new Redis({ ...OWNED_CLIENT_DEFAULTS, port }),
    // As rate-limiter-flexible's README creates it.
    rlfPlain: new Redis({ port, enableOfflineQueue: false }),
    rlfAuto: new Redis({ port, enableAutoPipelining: true }),
    incr: new Redis({ port, enableAutoPipelining: true }),
  };
  const admin = new Redis({ port });
  await Promise.all([...Object.values(clients), admin].map(ready));
  return {
    deployment: 'standalone',
    admins: [admin],
    variants: variantsFor('standalone', clients),
    close: async () => {
      for (const c of [...Object.values(clients), admin]) c.disconnect();
      await redis.stop();
    },
  };
}

async function cluster(): Promise<Environment> {
  const servers: RedisClusterProcess = await startRedisCluster(3);
  const nodes = servers.startupNodes;
  const clients: Clients = {
    // A Cluster client as the integration tests give the library one: auto-pipelining, no offline queue.
    ours: await libraryCluster(nodes),
    rlfPlain: new Cluster(nodes),
    rlfAuto: new Cluster(nodes, { enableAutoPipelining: true }),
    incr: new Cluster(nodes, { enableAutoPipelining: true }),
  };
  await Promise.all(Object.values(clients).map(ready));
  const admins = servers.masters.map((m) => new Redis({ port: m.port }));
  return {
    deployment: 'cluster',
    admins,
    variants: variantsFor('cluster', clients),
    close: async () => {
      for (const c of [...Object.values(clients), ...admins]) c.disconnect();
      await servers.stop();
    },
  };
}

/** The trackers of a scenario: `user0`…, one hot key, or 1M built once. */
function keySpaces(scenarios: readonly Scenario[]): Map<number, string[]> {
  const spaces = new Map<number, string[]>();
  for (const s of scenarios) {
    const n = SCENARIOS[s].keys;
    if (!spaces.has(n)) spaces.set(n, n === 1 ? ['hot'] : Array.from({ length: n }, (_, i) => `user${i}`));
  }
  return spaces;
}

async function main(): Promise<void> {
  const scenarios = chosenScenarios();
  const deployments = new Set(scenarios.map((s) => SCENARIOS[s].deployment));
  const environments: Environment[] = [];
  const results = new DecisionResults();
  try {
    if (deployments.has('standalone')) environments.push(await standalone());
    if (deployments.has('cluster')) environments.push(await cluster());
    const spaces = keySpaces(scenarios);
    const flush = (env: Environment) => Promise.all(env.admins.map((a) => a.flushall()));
    // JIT warm-up of every code path before anything is timed, on the first scenario each variant runs in.
    for (const env of environments) {
      for (const v of env.variants) {
        const scenario = scenarios.find((s) => v.scenarios.includes(s));
        if (!scenario) continue;
        await flush(env);
        const spec = SCENARIOS[scenario];
        await runCell(env.admins, v.make(BIG, spec), walk(spaces.get(spec.keys)!), 64, Math.min(200, settings.decisionMs));
      }
    }
    for (let round = 0; round < settings.rounds; round++) {
      for (const scenario of scenarios) {
        const spec = SCENARIOS[scenario];
        const env = environments.find((e) => e.deployment === spec.deployment)!;
        const keys = spaces.get(spec.keys)!;
        for (const concurrency of CONCURRENCIES) {
          for (const v of env.variants) {
            if (!v.scenarios.includes(scenario)) continue;
            await flush(env);
            const decide: Decide = v.make(spec.rejecting ? 1 : BIG, spec);
            // A rejecting hot key is over its limit (and, for the in-memory block, already blocked) before timing.
            if (spec.rejecting) for (let i = 0; i < 3; i++) await decide('hot');
            // 1M keys: each cell starts at a random point, so no cell revisits the trackers of the one before.
            const start = keys.length > 100_000 ? Math.floor(Math.random() * keys.length) : 0;
            results.add(
              scenario,
              concurrency,
              v.name,
              await runCell(env.admins, decide, walk(keys, start), concurrency, settings.decisionMs),
            );
          }
        }
        process.stderr.write(`decisions: round ${round + 1}/${settings.rounds}, ${scenario} done\n`);
      }
    }
    const variants = environments.flatMap((e) => e.variants);
    // One row per name: a variant of both deployments (rlf, our algorithms) reports each scenario's cells.
    const byName = new Map<string, Variant>();
    for (const v of variants) {
      const seen = byName.get(v.name);
      byName.set(v.name, seen ? { ...seen, scenarios: [...seen.scenarios, ...v.scenarios] } : v);
    }
    report([...byName.values()], results, scenarios, fallbackCount());
  } finally {
    for (const env of environments) await env.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
