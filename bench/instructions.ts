/**
 * Instructions per request: each HTTP variant's app (bench/http-app.ts, Fastify by default) runs under
 * valgrind's callgrind, which counts the instructions the app executes instead of timing them. A count
 * does not move when the box is busy, so "× bare" here is steady where req/s swings by ±30 % between
 * rounds. It is the req/s ratio the app would reach if it were the only bottleneck and every instruction
 * cost the same (cache misses and the kernel's share are not counted), so read it beside the HTTP part,
 * not instead of it.
 *
 * Per variant: the app boots under valgrind with instrumentation off and takes warm-up loads on each port
 * (so V8 has optimized both request paths, and connections have closed and opened a few times); then,
 * allow-all first and reject-all second, in the same process, instrumentation is switched on, the counters
 * zeroed, a measured load sent, and the counters dumped. The main thread (the event loop: what a request
 * costs the app's core) is reported apart from all threads (V8's compiler and GC helpers run beside it,
 * on the other core).
 *
 * Under valgrind the app runs ~50× slower, so work that happens per second rather than per request
 * (timers, V8 compiling and flushing code) weighs ~50× more per request than it does at full speed, and a
 * function V8 deoptimizes in the measured window shows up as a few thousand instructions more. The same
 * app measured twice agrees within ~2 %.
 *
 *   npm run bench:instructions   (needs valgrind: apt-get install -y valgrind)
 *                                 BENCH_INSTR_REQUESTS (default 4000), BENCH_INSTR_WARMUP (default 60000),
 *                                 BENCH_INSTR_PARALLEL (default 2), BENCH_ONLY, BENCH_HTTP_ADAPTERS
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { runsOn, VARIANTS, type HttpVariant, type LimitMode } from './http-app';
import { appEnv, appPorts, measuredModes, rejectsAll, stopChild } from './support/app-process';
import { benchRedis } from './support/redis';
import { fmtRate, fmtRatio, heading, table } from './support/report';
import { httpAdapters, selected, settings } from './support/settings';

const ADAPTERS = httpAdapters('fastify');
/** Warm-up loads per port: each opens its connections and closes them at the end. */
const WARMUP_LOADS = 3;
/** Few connections: the app is slow under valgrind, and 64 would only queue. */
const CONNECTIONS = 8;

/** Instructions per request of one app and limit mode. */
interface Count {
  main: number;
  all: number;
}

/** Runs one variant's app under callgrind and counts each mode's requests. */
async function countVariant(variant: HttpVariant, adapter: string, redisUrl: string): Promise<Record<LimitMode, Count>> {
  const dir = mkdtempSync(join(tmpdir(), `instr-${variant}-`));
  const out = join(dir, 'cg.out');
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--smc-check=all-non-file', // V8 writes the code it runs: valgrind must notice
      '--instr-atstart=no',
      '--separate-threads=yes',
      '--dump-instr=no',
      `--callgrind-out-file=${out}`,
      process.execPath,
      '-r',
      'ts-node/register/transpile-only',
      join(__dirname, 'http-app.ts'),
    ],
    {
      env: appEnv(variant, adapter, redisUrl),
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  try {
    const ports = await appPorts(child, `${variant}/${adapter} (under valgrind)`);
    const modes = measuredModes(variant);
    const url = (mode: LimitMode) => `http://127.0.0.1:${ports[mode]}/`;
    const rejecting = (mode: LimitMode) => mode === 'reject' && rejectsAll(variant);
    // Every app serves the same number of requests, in the same number of loads, before its first measured
    // one (the bare app warms its one port for both modes' share). V8 goes on compiling for a while, and
    // the first connections to close and the next to open deoptimize Node's stream and parser functions
    // (their objects change shape): an app whose measured load were its second would pay for that.
    const share = (2 * settings.instrWarmup) / modes.length / WARMUP_LOADS; // two modes per app
    for (const mode of modes) for (let i = 0; i < WARMUP_LOADS; i++) await load(url(mode), share, rejecting(mode));
    const counts = {} as Record<LimitMode, Count>;
    for (const mode of modes) {
      control(child, '--instr=on');
      control(child, '--zero');
      await load(url(mode), settings.instrRequests, rejecting(mode));
      control(child, '--dump');
      control(child, '--instr=off');
      counts[mode] = lastDump(dir, settings.instrRequests);
    }
    // The bare app has no limit: one measurement serves both columns.
    return variant === 'bare' ? { allow: counts.allow, reject: counts.allow } : counts;
  } finally {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Sends `amount` requests; throws unless every one was answered, all 2xx unless `rejecting`, and then at
 * most 1 % 2xx (a reject-all limit is 1 per window, so each window the load spans lets one through).
 */
async function load(url: string, amount: number, rejecting: boolean): Promise<void> {
  const result = await autocannon({ url, connections: CONNECTIONS, amount });
  const ok = rejecting ? result.non2xx >= amount * 0.99 : result.non2xx === 0;
  if (result.errors > 0 || result.requests.total !== amount || !ok) {
    throw new Error(
      `${url} (${rejecting ? 'reject' : 'allow'}): ${result.requests.total} of ${amount} requests answered, ${result.non2xx} not 2xx, ${result.errors} errors`,
    );
  }
}

/** `callgrind_control` on the app (it answers once the app's main thread next runs). */
function control(child: ChildProcess, option: string): void {
  execFileSync('callgrind_control', [option, String(child.pid)], { stdio: 'ignore' });
}

/** Instructions per request of the newest dump: its main thread (`-01`) and the sum over its threads. */
function lastDump(dir: string, requests: number): Count {
  const dumps = readdirSync(dir)
    .map((name) => /^cg\.out\.(\d+)-(\d+)$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null);
  const latest = Math.max(...dumps.map((m) => Number(m[1])));
  let main = 0;
  let all = 0;
  for (const [name, dump, thread] of dumps) {
    if (Number(dump) !== latest) continue;
    const summary = /^summary: (\d+)$/m.exec(readFileSync(join(dir, name), 'utf8'));
    const instructions = summary ? Number(summary[1]) : 0;
    all += instructions;
    if (Number(thread) === 1) main = instructions;
  }
  return { main: main / requests, all: all / requests };
}

/** Runs `tasks` at most `limit` at a time, results in order. */
async function pooled<T>(tasks: ReadonlyArray<() => Promise<T>>, limit: number): Promise<T[]> {
  const results = new Array<T>(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}

async function main(): Promise<void> {
  for (const tool of ['valgrind', 'callgrind_control']) {
    if (spawnSync(tool, ['--version'], { stdio: 'ignore' }).error) {
      throw new Error(`bench:instructions needs ${tool} on PATH (Debian/Ubuntu: apt-get install -y valgrind).`);
    }
  }
  const variants = VARIANTS.filter((v) => selected(v));
  const redis = await benchRedis();
  try {
    heading('Instructions per request (callgrind), allow-all and reject-all', {
      requests: settings.instrRequests,
      warmup: settings.instrWarmup,
      connections: CONNECTIONS,
      ourAlgorithm: settings.httpAlgorithm,
      note: '"× bare" = bare instructions ÷ the variant\'s, main thread',
    });
    const redisUrl = `redis://127.0.0.1:${redis.port}`;
    for (const adapter of ADAPTERS) {
      const here = variants.filter((variant) => runsOn(variant, adapter));
      const counts = await pooled(
        here.map((variant) => () => countVariant(variant, adapter, redisUrl)),
        settings.instrParallel,
      );
      const bare = counts[here.indexOf('bare')];
      const cells = (count: Count, mode: LimitMode) => [
        fmtRate(count.main),
        bare ? fmtRatio(bare[mode].main / count.main) : 'n/a',
        fmtRate(count.all),
      ];
      console.log(`\n### ${adapter}\n`);
      console.log(
        table(
          ['variant', 'allow: main thread', '× bare', 'all threads', 'reject: main thread', '× bare', 'all threads'],
          here.map((variant, i) => [variant, ...cells(counts[i].allow, 'allow'), ...cells(counts[i].reject, 'reject')]),
        ),
      );
    }
  } finally {
    await redis.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
