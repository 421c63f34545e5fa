/**
 * Ceiling: what one Redis core does with `redis-benchmark` as the client, for INCR and for EVALSHA of each
 * of our decision scripts (and of rate-limiter-flexible's script, for scale), pipelined -P 1 and -P 16.
 * No Node on the request path: this is the most any client library can get from this Redis, and the
 * share of it each script spends.
 *
 *   npm run bench:ceiling        (BENCH_ROUNDS, BENCH_QUICK; see bench/support/settings.ts)
 */
import { spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithm } from '../lib/algorithms/algorithm.interface';
import { composeOnePolicyLibrary, composeOnePolicyScript } from '../lib/stores/redis/redis-scripts';
import { benchRedis } from './support/redis';
import { fmtRate, fmtRatio, heading, median, table } from './support/report';
import { onePolicyArgs, RLF_SCRIPT, rlfArgs } from './support/scripts';
import { settings } from './support/settings';

const KEYS_RANGE = 10_000;
const CLIENTS = 50;
/** Allow-all limit: never reached during the run. */
const BIG = 1_000_000;

interface Case {
  name: string;
  scenario: 'keys' | 'hot-reject';
  /** redis-benchmark command words; `__rand_int__` is replaced per request (-r). */
  args: (sha: string) => string[];
  sha?: string;
  script?: string;
}

/**
 * Runs each script case once through the client and fails unless it decided: a script whose KEYS or ARGV
 * no longer match these arguments answers every call with an error, which redis-benchmark would time as if
 * it were a decision.
 */
async function assertDecides(client: Redis, list: readonly Case[]): Promise<void> {
  for (const c of list) {
    if (!c.sha || c.name.startsWith('rate-limiter-flexible')) continue;
    const [command, ...rest] = c.args(c.sha).map((arg) => arg.replace('__rand_int__', 'probe'));
    const reply = (await client.call(command, ...rest)) as unknown[];
    // A one-policy reply: now, status, remaining, …; an error would have thrown, a wrong layout gives no status.
    if (!Array.isArray(reply) || typeof reply[1] !== 'number' || typeof reply[2] !== 'number') {
      throw new Error(
        `ceiling: ${c.name} did not decide (${JSON.stringify(reply)}); update onePolicyArgs (support/scripts.ts) to one-policy.lua's KEYS and ARGV.`,
      );
    }
  }
}

function cases(algorithms: readonly RateLimitAlgorithm[]): Case[] {
  const list: Case[] = [
    { name: 'INCR (baseline)', scenario: 'keys', args: () => ['INCR', 'incr:{__rand_int__}'] },
    {
      name: 'rate-limiter-flexible script',
      scenario: 'keys',
      script: RLF_SCRIPT,
      args: rlfArgs('rlflx:{__rand_int__}', BIG),
    },
  ];
  const library = composeOnePolicyLibrary(algorithms);
  for (const a of algorithms) {
    list.push({ name: a.name, scenario: 'keys', script: composeOnePolicyScript(a), args: onePolicyArgs(a, '__rand_int__', BIG) });
    // What a standalone server gets through ioredis once the store loaded its function library.
    const words = onePolicyArgs(a, '__rand_int__', BIG);
    list.push({
      name: `${a.name} (FCALL)`,
      scenario: 'keys',
      args: (sha) => ['FCALL', library.functions.get(a.name)!, ...words(sha).slice(2)],
    });
  }
  list.push({
    name: 'rate-limiter-flexible script',
    scenario: 'hot-reject',
    script: RLF_SCRIPT,
    args: rlfArgs('rlflx:hot', 1),
  });
  for (const a of algorithms)
    list.push({ name: a.name, scenario: 'hot-reject', script: composeOnePolicyScript(a), args: onePolicyArgs(a, 'hot', 1) });
  return list;
}

function runBenchmark(port: number, args: string[], pipeline: number): { rps: number; p50: number } {
  // About a second per run on this box: the slow scripts do ~20k/s unpipelined, ~50k/s with -P 16.
  const requests = pipeline === 1 ? (settings.quick ? 10_000 : 20_000) : settings.quick ? 30_000 : 60_000;
  const out = spawnSync(
    'redis-benchmark',
    ['-p', String(port), '-c', String(CLIENTS), '-n', String(requests), '-P', String(pipeline), '-r', String(KEYS_RANGE), '--csv', ...args],
    { encoding: 'utf8' },
  );
  if (out.status !== 0) throw new Error(`redis-benchmark failed: ${out.stderr || out.stdout}`);
  const row = out.stdout.trim().split('\n').pop() ?? '';
  const cells = row.split('","').map((c) => c.replace(/"/g, ''));
  return { rps: Number(cells[1]), p50: Number(cells[4]) };
}

async function main(): Promise<void> {
  const redis = await benchRedis();
  const client = new Redis({ port: redis.port });
  try {
    const algorithms = new RateLimitAlgorithmRegistry().all();
    const list = cases(algorithms);
    for (const c of list) if (c.script) c.sha = String(await client.script('LOAD', c.script));
    await client.function('LOAD', 'REPLACE', composeOnePolicyLibrary(algorithms).code);
    await assertDecides(client, list);
    const pipelines = [1, 16];
    const rps = new Map<string, number[]>();
    /** Redis's own CPU time per call (INFO commandstats): the script's cost, less sensitive to client noise. */
    const usec = new Map<string, number[]>();
    const id = (c: Case, p: number) => `${c.scenario}|${c.name}|${p}`;
    for (let round = 0; round < settings.rounds; round++) {
      for (const p of pipelines) {
        for (const c of list) {
          // A rejecting hot key must already be over its limit; allowing keys start empty.
          await client.flushall();
          if (c.scenario === 'hot-reject') runBenchmark1(redis.port, c.args(c.sha ?? ''));
          await client.config('RESETSTAT');
          const r = runBenchmark(redis.port, c.args(c.sha ?? ''), p);
          push(rps, id(c, p), r.rps);
          push(usec, id(c, p), await usecPerCall(client, c.args('')[0]));
        }
      }
    }
    heading('Ceiling: redis-benchmark against one Redis core', {
      rounds: settings.rounds,
      clients: CLIENTS,
      keys: KEYS_RANGE,
      note: 'requests/s and Redis µs per call (INFO commandstats), medians of rounds; ratio = script / INCR of the same round',
    });
    for (const scenario of ['keys', 'hot-reject'] as const) {
      console.log(scenario === 'keys' ? '### 10k keys, allowing\n' : '\n### One hot key, rejecting\n');
      const rows = list
        .filter((c) => c.scenario === scenario)
        .map((c) => [
          c.name,
          ...pipelines.flatMap((p) => {
            const own = rps.get(id(c, p)) ?? [];
            const base = rps.get(`keys|INCR (baseline)|${p}`) ?? [];
            return [fmtRate(median(own)), fmtRatio(median(own.map((v, i) => v / base[i])))];
          }),
          median(usec.get(id(c, 16)) ?? []).toFixed(2),
        ]);
      console.log(table(['command', 'req/s -P 1', 'vs INCR', 'req/s -P 16', 'vs INCR', 'Redis µs/call (-P 16)'], rows));
    }
  } finally {
    client.disconnect();
    await redis.stop();
  }
}

function push(map: Map<string, number[]>, key: string, value: number): void {
  map.set(key, [...(map.get(key) ?? []), value]);
}

/** `usec_per_call` of `command` since the last CONFIG RESETSTAT. */
async function usecPerCall(client: Redis, command: string): Promise<number> {
  const info = String(await client.info('commandstats'));
  const match = new RegExp(`cmdstat_${command.toLowerCase()}:calls=\\d+,usec=\\d+,usec_per_call=([\\d.]+)`).exec(info);
  return match ? Number(match[1]) : NaN;
}

/** One request, to push a rejecting hot key over its limit of 1 before the timed run. */
function runBenchmark1(port: number, args: string[]): void {
  spawnSync('redis-benchmark', ['-p', String(port), '-c', '1', '-n', '1', ...args], { encoding: 'utf8' });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
