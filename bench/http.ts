/**
 * HTTP overhead: a Nest endpoint on Fastify and on Express, loaded by autocannon in its own process, for
 * the bare app, a guard that does nothing, one that only answers as ours does (headers, 429) without
 * deciding, our guard on the memory store and on Redis, @nestjs/throttler in memory and with
 * @nest-lab/throttler-storage-redis; allow-all and reject-all limits. Per adapter, every variant's app runs
 * in its own process (bench/http-app.ts) for the whole part; after one warm-up each, rounds measure every
 * variant in turn (A B C A B C…) with the bare app again after every two cells, and each is compared with
 * the bare app measured just before and just after it.
 *
 *   npm run bench:http   (BENCH_HTTP_ROUNDS, BENCH_HTTP_SECONDS, BENCH_HTTP_WARMUP_SECONDS, BENCH_HTTP_CONNECTIONS,
 *                         BENCH_HTTP_ALGORITHM, BENCH_ONLY=bare,ours-redis,…, BENCH_HTTP_ADAPTERS=fastify,express)
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { VARIANTS, type HttpVariant, type LimitMode } from './http-app';
import type { LoadRequest, LoadResult } from './http-load';
import { appEnv, appPorts, measuredModes, stopChild } from './support/app-process';
import { benchRedis } from './support/redis';
import { fmtRate, fmtRatios, heading, median, table } from './support/report';
import { httpAdapters, selected, settings } from './support/settings';

const ADAPTERS = httpAdapters('fastify,express');
const MODES: LimitMode[] = ['allow', 'reject'];
const TS_NODE = ['-r', 'ts-node/register/transpile-only'];

interface Load {
  rps: number;
  p50: number;
  p99: number;
  /** Share of responses that were not 2xx (429s when rejecting). */
  non2xx: number;
  errors: number;
  /** The app process's CPU time (user + system) per response, µs: steadier than req/s on a busy box. */
  cpuUs: number;
  /**
   * The system (kernel) part of {@link cpuUs}: mostly the socket writes, about the same for every variant.
   * bench:instructions counts only the user part, which is why its "× bare" is lower than this part's.
   */
  kernelUs: number;
  /**
   * The bare app around this cell: the mean of its cells just before and just after (it runs after every
   * {@link BARE_EVERY} cells). Ratios use it, so a variant is compared with the box as it was at the time.
   */
  bare?: { rps: number; cpuUs: number };
}

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

/** Boots one variant's app pair in a child process and resolves with its ports. */
async function boot(variant: HttpVariant, adapter: string, redisUrl: string): Promise<App> {
  const child = spawn(process.execPath, [...TS_NODE, join(__dirname, 'http-app.ts')], {
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
  const results = new Map<string, Load[]>();
  const id = (adapter: string, variant: HttpVariant, mode: LimitMode) => `${adapter}|${variant}|${mode}`;
  const generator = loadGenerator();
  const apps: App[] = [];
  try {
    await admin.flushall();
    for (const adapter of ADAPTERS) {
      for (const variant of variants) apps.push(await boot(variant, adapter, redisUrl));
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
        results.set(id(adapter, app.variant, mode), [...(results.get(id(adapter, app.variant, mode)) ?? []), load]);
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
  report(variants, results, id);
}

function report(
  variants: readonly HttpVariant[],
  results: Map<string, Load[]>,
  id: (a: string, v: HttpVariant, m: LimitMode) => string,
): void {
  heading('HTTP: Nest endpoint + guard, autocannon in a separate process', {
    rounds: settings.httpRounds,
    apps: 'one process per variant and adapter, kept for all rounds',
    seconds: settings.httpSeconds,
    warmup: settings.httpWarmupSeconds,
    connections: settings.httpConnections,
    ourAlgorithm: settings.httpAlgorithm,
    window: '60s',
    bare: `measured before the first cell of a round and after every ${BARE_EVERY} cells`,
    note:
      'req/s median of rounds; "× bare" = median of rounds of req/s ÷ the bare app\'s just before and after; latency p50 / p99 in ms; ' +
      "app CPU = the app process's user + system CPU per response, the system (kernel) part in brackets",
  });
  // A cell's req/s relative to the bare app around it; two variants compare as the ratio of those, so
  // neither is judged by the box's speed at the other's time.
  const relative = (load: Load | undefined) => (load === undefined ? NaN : load.bare ? load.rps / load.bare.rps : load.rps);
  const ratios = (adapter: string, variant: HttpVariant, mode: LimitMode, baseVariant: HttpVariant, baseMode: LimitMode): number[] => {
    const own = results.get(id(adapter, variant, mode)) ?? [];
    if (baseVariant === 'bare') return own.map((r) => (r.bare ? r.rps / r.bare.rps : NaN));
    const base = results.get(id(adapter, baseVariant, baseMode)) ?? [];
    return own.map((r, i) => relative(r) / relative(base[i]));
  };
  for (const adapter of ADAPTERS) {
    console.log(`\n### ${adapter}\n`);
    const rows: string[][] = [];
    for (const mode of MODES) {
      for (const variant of variants) {
        if (variant === 'bare' && mode === 'reject') continue;
        const runs = results.get(id(adapter, variant, mode)) ?? [];
        if (runs.length === 0) continue;
        rows.push([
          variant === 'bare' ? 'bare (no limiter)' : `${variant}, ${mode}-all`,
          fmtRate(median(runs.map((r) => r.rps))),
          variant === 'bare' ? '1.00×' : fmtRatios(ratios(adapter, variant, mode, 'bare', 'allow')),
          `${median(runs.map((r) => r.p50)).toFixed(1)} / ${median(runs.map((r) => r.p99)).toFixed(1)}`,
          `${median(runs.map((r) => r.cpuUs)).toFixed(1)} (${median(runs.map((r) => r.kernelUs)).toFixed(1)})`,
          `${(median(runs.map((r) => r.non2xx)) * 100).toFixed(1)}%`,
          String(runs.reduce((n, r) => n + r.errors, 0)),
        ]);
      }
    }
    console.log(
      table(['variant', 'req/s', '× bare (rounds)', 'latency p50 / p99 ms', 'app CPU µs/req (kernel)', 'non-2xx', 'errors'], rows),
    );
  }
  console.log('\n### Targets (per-round ratios in this run)\n');
  const targets: string[][] = [];
  for (const adapter of ADAPTERS) {
    for (const mode of MODES) {
      if (variants.includes('ours-redis') && variants.includes('throttler-redis')) {
        const r = ratios(adapter, 'ours-redis', mode, 'throttler-redis', mode);
        targets.push([
          `${adapter} ${mode}-all: ours-redis vs throttler-redis`,
          adapter === 'fastify' ? '≥ 1.3×' : '—',
          fmtRatios(r),
          adapter === 'fastify' ? met(r, 1.3) : '',
        ]);
      }
      if (variants.includes('ours-memory') && variants.includes('bare')) {
        const r = ratios(adapter, 'ours-memory', mode, 'bare', 'allow');
        targets.push([
          `${adapter} ${mode}-all: ours-memory vs bare`,
          adapter === 'fastify' ? '≥ 0.85×' : '—',
          fmtRatios(r),
          adapter === 'fastify' ? met(r, 0.85) : '',
        ]);
        // The same comparison in app CPU per request (bare µs / ours µs, so higher is better), which the
        // box's drift moves much less than req/s.
        const own = results.get(id(adapter, 'ours-memory', mode)) ?? [];
        targets.push([
          `${adapter} ${mode}-all: ours-memory vs bare, app CPU per request (bare / ours)`,
          '—',
          fmtRatios(own.map((r) => (r.bare?.cpuUs ?? NaN) / r.cpuUs)),
          '',
        ]);
      }
      if (variants.includes('answer-only') && variants.includes('bare') && variants.includes('ours-memory')) {
        // Split ours-memory vs bare in two: what answering costs any limiter (the headers; the 429), and
        // what deciding costs on top.
        targets.push([
          `${adapter} ${mode}-all: answer-only vs bare`,
          '—',
          fmtRatios(ratios(adapter, 'answer-only', mode, 'bare', 'allow')),
          '',
        ]);
        targets.push([
          `${adapter} ${mode}-all: ours-memory vs answer-only`,
          '—',
          fmtRatios(ratios(adapter, 'ours-memory', mode, 'answer-only', mode)),
          '',
        ]);
      }
      if (variants.includes('ours-memory') && variants.includes('throttler-memory')) {
        const r = ratios(adapter, 'ours-memory', mode, 'throttler-memory', mode);
        targets.push([`${adapter} ${mode}-all: ours-memory vs throttler-memory`, '—', fmtRatios(r), '']);
      }
    }
  }
  console.log(table(['comparison', 'goal', 'median (rounds)', 'met'], targets));
}

function met(ratios: number[], goal: number): string {
  const m = median(ratios);
  return Number.isFinite(m) ? (m >= goal ? 'yes' : 'no') : 'n/a';
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
