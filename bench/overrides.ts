/**
 * What runtime overrides cost a decision: decisions/s with no override set, and with 10,000 set on the same
 * policy name (9,997 exact overrides on other trackers, two prefixes (`gold-*`, `free-tier-*`) that match none of
 * the traffic, and one exact override matching one of the 10,000 trackers the traffic cycles through), on the
 * memory store and on Redis (the module's store stack), through the guard's decision (`decideRoute`, a route
 * with one `fixed-window` policy `by: 'ip'`: the allocation-free path) and through `RateLimiterService.consume`.
 * The two variants are two instances with their own key prefix (so their own overrides), run interleaved
 * (none / 10k, then 10k / none, …); each round's ratio is the 10k rate over the none rate of that round, and the
 * table shows the median of those ratios. Each instance polls its overrides as an app does (every 500 ms).
 *
 *   TS_NODE_SWC=true node -r ts-node/register/transpile-only bench/overrides.ts   (BENCH_ROUNDS, default 7; BENCH_DECISION_MS)
 *
 * Closed loops: the memory store decides synchronously, one caller; Redis, 64 callers each awaiting its decision.
 */
import { performance } from 'node:perf_hooks';
import type { ExecutionContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimiterService, type RateLimitDecision, type RateLimitModuleOptions, type RateLimitPolicy } from '../lib';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import { IpTrackers, type TrackerSource } from '../lib/http/tracker';
import { createStore, OWNED_CLIENT_DEFAULTS } from '../lib/pipeline/create-store';
import { RateLimitEngine } from '../lib/pipeline/rate-limit.engine';
import { decideRoute, routeTrackers, type RouteDecisionInput, type RouteOutcome } from '../lib/routes/decide-route';
import { buildRoutePlan } from '../lib/routes/route-plan';
import { UserFallbackWarnings } from '../lib/routes/user-fallback-warnings';
import { UserFunctionDeadlines } from '../lib/routes/user-function-deadlines';
import type { RateLimitStore } from '../lib/stores/store.interface';
import { benchRedis } from './support/redis';
import { fmtRate, fmtRatio, fmtRatios, heading, median, table } from './support/report';
import { settings } from './support/settings';

const ROUNDS = process.env.BENCH_ROUNDS ? settings.rounds : 7;
const KEYS = 10_000;
const OVERRIDES = 10_000;
const REDIS_CALLERS = 64;
const POLICY: RateLimitPolicy = { name: 'api', algorithm: 'fixed-window', limit: 100_000_000, window: '1h' };
/** The one tracker of the traffic an override matches (its limit is what shows it applied). */
const MATCHED = 'ip:10.0.0.7';
const MATCHED_LIMIT = 200_000_000;
const registry = new RateLimitAlgorithmRegistry();

type Backend = 'memory' | 'Redis';
type Path = 'guard (decideRoute)' | 'RateLimiterService.consume';
const PATHS: Path[] = ['guard (decideRoute)', 'RateLimiterService.consume'];

/** One instance: its store stack, engine, service and a route's decision input. */
interface Instance {
  overrides: number;
  store: RateLimitStore;
  engine: RateLimitEngine;
  svc: RateLimiterService;
  route: Omit<RouteDecisionInput, 'caller'>;
}

interface Cell {
  perSec: number;
  /** Node CPU µs per decision. */
  cpuUs: number;
}

const trackers = Array.from({ length: KEYS }, (_, i) => `ip:10.0.${i >> 8}.${i & 255}`);
const callers: TrackerSource[] = trackers.map((tracker) => ({ defaultTracker: () => tracker, user: undefined }));

async function instance(options: RateLimitModuleOptions, overrides: number): Promise<Instance> {
  const store = createStore(options, registry);
  await store.ready?.(5_000);
  const engine = new RateLimitEngine(store, options);
  const svc = new RateLimiterService(engine, registry, options);
  const plan = buildRoutePlan({ policies: [POLICY], where: 'bench', route: 'Bench.get', scopeKey: 'r=Bench.get' }, registry);
  const route = {
    plan,
    context: {} as ExecutionContext,
    engine,
    trackers: routeTrackers(options.prefix),
    ips: new IpTrackers(64),
    deadlines: new UserFunctionDeadlines(5_000),
    userFallbacks: new UserFallbackWarnings(),
  };
  // The service learns the policy's name at its first call: setOverride checks names it knows.
  await svc.consume(POLICY, trackers[0]);
  if (overrides > 0) {
    await svc.setOverride('api', MATCHED, { limit: MATCHED_LIMIT });
    await svc.setOverride('api', 'gold-*', { limit: 5 });
    await svc.setOverride('api', 'free-tier-*', { limit: 5 });
    for (let i = 0; i < overrides - 3; i++) await svc.setOverride('api', `ip:192.168.${i >> 8}.${i & 255}`, { limit: 5 + (i % 7) });
  }
  await engine.overrides.start();
  return { overrides, store, engine, svc, route };
}

/** One cell: `ms` of decisions cycling through the 10,000 trackers. */
async function runCell(backend: Backend, path: Path, inst: Instance, ms: number): Promise<Cell> {
  let next = 0;
  let decisions = 0;
  let matchedLimit = 0;
  const note = (d: RateLimitDecision, i: number) => {
    if (d.reason === 'store-unavailable') throw new Error('a fallback answered: the store did not');
    if (i === 7) matchedLimit = d.limit;
  };
  const decide = (): RouteOutcome | Promise<unknown> => {
    const i = next++ % KEYS;
    if (path === 'RateLimiterService.consume') return inst.svc.consume(POLICY, trackers[i]).then((d) => (note(d, i), d));
    const outcome = decideRoute({ ...inst.route, caller: callers[i] });
    if (outcome instanceof Promise) return outcome.then((o) => (note(o.decisions[0], i), o));
    note(outcome.decisions[0], i);
    return outcome;
  };
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const deadline = start + ms;
  if (backend === 'memory') {
    while (performance.now() < deadline) {
      for (let j = 0; j < 256; j++) {
        const r = decide();
        if (r instanceof Promise) await r;
      }
      decisions += 256;
    }
  } else {
    await Promise.all(
      Array.from({ length: REDIS_CALLERS }, async () => {
        while (performance.now() < deadline) {
          await decide();
          decisions++;
        }
      }),
    );
  }
  const elapsed = performance.now() - start;
  const cpu = process.cpuUsage(cpu0);
  const expected = inst.overrides > 0 ? MATCHED_LIMIT : POLICY.limit;
  if (decisions > 7 && matchedLimit !== expected) throw new Error(`${MATCHED} decided with limit ${matchedLimit}, not ${String(expected)}`);
  return { perSec: (decisions * 1_000) / elapsed, cpuUs: (cpu.user + cpu.system) / decisions };
}

async function main(): Promise<void> {
  const redis = await benchRedis();
  const clients: Redis[] = [];
  const client = () => {
    const c = new Redis({ ...OWNED_CLIENT_DEFAULTS, port: redis.port });
    clients.push(c);
    return c;
  };
  const setupStarted = performance.now();
  const instances: Record<Backend, Instance[]> = {
    memory: [await instance({ prefix: 'none' }, 0), await instance({ prefix: 'tenk' }, OVERRIDES)],
    Redis: [
      await instance({ redis: client(), prefix: 'none', storeTimeoutMs: 10_000 }, 0),
      await instance({ redis: client(), prefix: 'tenk', storeTimeoutMs: 10_000 }, OVERRIDES),
    ],
  };
  process.stderr.write(`overrides: set up in ${((performance.now() - setupStarted) / 1_000).toFixed(1)} s\n`);
  const results = new Map<string, Cell[]>();
  const id = (backend: Backend, path: Path, overrides: number) => `${backend}|${path}|${overrides}`;
  try {
    for (const backend of ['memory', 'Redis'] as const) {
      for (const path of PATHS) for (const inst of instances[backend]) await runCell(backend, path, inst, 300); // JIT warm-up
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const backend of ['memory', 'Redis'] as const) {
        for (const path of PATHS) {
          const order = round % 2 === 0 ? instances[backend] : [...instances[backend]].reverse();
          for (const inst of order) {
            const key = id(backend, path, inst.overrides);
            results.set(key, [...(results.get(key) ?? []), await runCell(backend, path, inst, settings.decisionMs)]);
          }
        }
      }
      process.stderr.write(`overrides: round ${round + 1}/${ROUNDS} done\n`);
    }
    report(results, id);
  } finally {
    for (const backend of ['memory', 'Redis'] as const) {
      for (const inst of instances[backend]) {
        inst.engine.overrides.stop();
        await inst.store.close();
      }
    }
    for (const c of clients) c.disconnect();
    await redis.stop();
  }
}

function report(results: Map<string, Cell[]>, id: (b: Backend, p: Path, o: number) => string): void {
  heading('Decisions/s with 0 vs 10,000 runtime overrides', {
    rounds: ROUNDS,
    cellMs: settings.decisionMs,
    keys: KEYS,
    note: `fixed-window; memory: 1 synchronous caller, Redis: ${REDIS_CALLERS} callers; median decisions/s of rounds; 10k ÷ none: median of same-round ratios (per-round in brackets); Node CPU µs per decision, and the median of same-round ratios of it`,
  });
  const rows = (['memory', 'Redis'] as const).flatMap((backend) =>
    PATHS.map((path) => {
      const none = results.get(id(backend, path, 0)) ?? [];
      const tenk = results.get(id(backend, path, OVERRIDES)) ?? [];
      return [
        backend,
        path,
        fmtRate(median(none.map((c) => c.perSec))),
        fmtRate(median(tenk.map((c) => c.perSec))),
        fmtRatios(tenk.map((c, i) => c.perSec / (none[i]?.perSec ?? NaN))),
        `${median(none.map((c) => c.cpuUs)).toFixed(2)} / ${median(tenk.map((c) => c.cpuUs)).toFixed(2)}`,
        fmtRatio(median(tenk.map((c, i) => c.cpuUs / (none[i]?.cpuUs ?? NaN)))),
      ];
    }),
  );
  console.log(
    table(['store', 'path', 'none dec/s', '10k overrides dec/s', '10k ÷ none', 'CPU µs/dec none / 10k', 'CPU/dec 10k ÷ none'], rows),
  );
  console.log(
    `\nThe tracker ${MATCHED} was decided with the matching override's limit in every 10k cell, and with the policy's in every other.`,
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
