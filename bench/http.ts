/**
 * HTTP overhead: a Nest endpoint on Fastify and on Express, loaded by autocannon in its own process, for
 * the bare app, a guard that does nothing, one that only answers as ours does (headers, the same 429
 * exception through Nest's exception path) without deciding, our guard on the memory store and on Redis,
 * @nestjs/throttler in memory and with @nest-lab/throttler-storage-redis, and each framework's own limiter
 * (@fastify/rate-limit on Fastify, express-rate-limit + rate-limit-redis on Express) in memory and on
 * Redis; allow-all and reject-all limits. Per adapter, every variant's app runs
 * in its own process (bench/http-app.ts) for the whole part; after one warm-up each, rounds measure every
 * variant in turn (A B C A B C…) with the bare app again after every two cells, and each is compared with
 * the bare app measured just before and just after it.
 *
 *   npm run bench:http   (BENCH_HTTP_ROUNDS, BENCH_HTTP_SECONDS, BENCH_HTTP_WARMUP_SECONDS, BENCH_HTTP_CONNECTIONS,
 *                         BENCH_HTTP_ALGORITHM, BENCH_ONLY=bare,ours-redis,…, BENCH_HTTP_ADAPTERS=fastify,express,
 *                         BENCH_HTTP_NODE_ARGS)
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { runsOn, VARIANTS, type HttpVariant, type LimitMode } from './http-app';
import type { LoadRequest, LoadResult } from './http-load';
import { appEnv, appPorts, measuredModes, stopChild } from './support/app-process';
import { benchRedis } from './support/redis';
import { httpContext, HttpResults, report, type Load } from './support/http-report';
import { httpAdapters, selected, settings } from './support/settings';

const ADAPTERS = httpAdapters('fastify,express');
const TS_NODE = ['-r', 'ts-node/register/transpile-only'];

/** The bare app is measured again after this many cells of the other variants. */
const BARE_EVERY = 2;

/** What autocannon reports for one cell, before the app's CPU is added. */
type LoadSample = Omit<Load, 'cpuUs' | 'kernelUs'> & { total: number };

interface App {
  variant: HttpVariant;
  child: ChildProcess;
  ports: Record<LimitMode, number>;
}

/** One measured cell: an app and the limit it runs with. */
interface Cell {
  app: App;
  mode: LimitMode;
}

/**
 * Node flags for the app processes only (BENCH_HTTP_NODE_ARGS, space-separated), e.g. `--cpu-prof
 * --cpu-prof-dir=/tmp/prof` to profile each app under the bench's own load; NODE_OPTIONS refuses that flag.
 */
const APP_NODE_ARGS = (process.env.BENCH_HTTP_NODE_ARGS ?? '').split(' ').filter(Boolean);

/** Boots one variant's app pair in a child process and resolves with its ports. */
async function boot(variant: HttpVariant, adapter: string, redisUrl: string): Promise<App> {
  const child = spawn(process.execPath, [...APP_NODE_ARGS, ...TS_NODE, join(__dirname, 'http-app.ts')], {
    env: appEnv(variant, adapter, redisUrl),
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  return { variant, child, ports: await appPorts(child, `${variant}/${adapter}`) };
}

/** The app's CPU time so far (user + system) and its system part, µs, asked over IPC. */
function appCpu(app: App): Promise<{ cpuUs: number; kernelUs: number }> {
  return new Promise((resolve) => {
    app.child.once('message', (message: { cpuUs: number; kernelUs: number }) => resolve(message));
    app.child.send('cpu');
  });
}

/** The load generator process (bench/http-load.ts), kept for the whole part. */
function loadGenerator(): { load(port: number, seconds: number): Promise<LoadSample>; child: ChildProcess } {
  const child = fork(join(__dirname, 'http-load.ts'), [], { execArgv: TS_NODE, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const load = (port: number, seconds: number) =>
    new Promise<LoadSample>((resolve, reject) => {
      child.once('message', (message: { result?: LoadResult; error?: string }) => {
        if (!message.result) return reject(new Error(`autocannon: ${message.error}`));
        const r = message.result;
        resolve({ rps: r.rps, p50: r.p50, p99: r.p99, non2xx: r.total ? r.non2xx / r.total : 0, errors: r.errors, total: r.total });
      });
      const request: LoadRequest = { url: `http://127.0.0.1:${port}/`, seconds, connections: settings.httpConnections };
      child.send(request);
    });
  return { load, child };
}

async function main(): Promise<void> {
  const variants = VARIANTS.filter((v) => selected(v));
  const redis = await benchRedis();
  const admin = new Redis({ port: redis.port });
  const redisUrl = `redis://127.0.0.1:${redis.port}`;
  const results = new HttpResults();
  const generator = loadGenerator();
  const apps: App[] = [];
  try {
    await admin.flushall();
    for (const adapter of ADAPTERS) {
      for (const variant of variants) if (runsOn(variant, adapter)) apps.push(await boot(variant, adapter, redisUrl));
      const cells = apps.flatMap((app) => measuredModes(app.variant).map((mode) => ({ app, mode })));
      for (const { app, mode } of cells) await generator.load(app.ports[mode], settings.httpWarmupSeconds);
      const measure = async ({ app, mode }: Cell): Promise<Load> => {
        const before = await appCpu(app);
        const { total, ...load } = await generator.load(app.ports[mode], settings.httpSeconds);
        const after = await appCpu(app);
        const perResponse = (us: number) => us / Math.max(total, 1);
        return { ...load, cpuUs: perResponse(after.cpuUs - before.cpuUs), kernelUs: perResponse(after.kernelUs - before.kernelUs) };
      };
      const record = ({ app, mode }: Cell, load: Load) => {
        results.add(adapter, app.variant, mode, load);
      };
      const bare = cells.find(({ app }) => app.variant === 'bare');
      const others = cells.filter((cell) => cell !== bare);
      const measureBare = async (): Promise<Load | undefined> => {
        if (!bare) return undefined;
        const load = await measure(bare);
        record(bare, load);
        return load;
      };
      for (let round = 0; round < settings.httpRounds; round++) {
        // bare, A, B, bare, C, D, bare, …: each cell is compared with the bare app just before and after it.
        let before = await measureBare();
        for (let i = 0; i < others.length; i += BARE_EVERY) {
          const group: Array<[Cell, Load]> = [];
          for (const cell of others.slice(i, i + BARE_EVERY)) group.push([cell, await measure(cell)]);
          const after = await measureBare();
          for (const [cell, load] of group) {
            if (before && after) load.bare = { rps: (before.rps + after.rps) / 2, cpuUs: (before.cpuUs + after.cpuUs) / 2 };
            record(cell, load);
          }
          before = after;
        }
        process.stderr.write(`http ${adapter}: round ${round + 1}/${settings.httpRounds} done\n`);
      }
      for (const app of apps.splice(0)) await stopChild(app.child);
    }
  } finally {
    for (const app of apps) await stopChild(app.child);
    await stopChild(generator.child);
    admin.disconnect();
    await redis.stop();
  }
  report(variants, ADAPTERS, results, httpContext(BARE_EVERY));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
