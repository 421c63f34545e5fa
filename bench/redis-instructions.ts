/**
 * Redis instructions per call: one redis-server runs under valgrind's callgrind, and each case's calls are
 * counted in instructions instead of timed. A count does not move when the box is busy, so this part
 * settles what `bench:ceiling`'s µs per call can only estimate within ±20 % on a shared 2-core machine: how
 * much Redis work each of our scripts costs next to rate-limiter-flexible's, and where it goes.
 *
 * Cases, 10k keys, every call allowed: INCR; an EVALSHA that only returns 1 with a one-policy decision's KEYS and
 * ARGV (what any script call costs before its body runs); rate-limiter-flexible's script; the commands our
 * one-policy fixed-window script sends, in the same order and with no logic between them (with and without the
 * lockout read; no decision reads a deny key): the floor of that script as long as it keeps its keys and reads; each algorithm's
 * one-policy script (a Cluster, `batchDecisions: false`, every quiet API); and decide.lua deciding 16 trackers in
 * one call (a standalone Redis under load), counted per decision.
 *
 * Per case: 40,000 calls with instrumentation off (the script is compiled, ~98 % of the keys exist), then the measured
 * calls (`redis-benchmark -c 1 -P 16`), then a dump. Only redis-server's own instructions are counted:
 * the kernel's share (sockets) and cache misses are not, so a ratio here is the one Redis would reach if
 * every instruction cost the same. The same case measured twice agrees within ~2 %.
 *
 *   npm run bench:redis-instructions   (needs valgrind: apt-get install -y valgrind; ~1 minute;
 *                                       BENCH_QUICK for fewer calls; not part of `npm run bench`)
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import { composeDecideScript, composeOnePolicyLibrary, composeOnePolicyScript } from '../lib/stores/redis/redis-scripts';
import { freePort } from '../test/support/redis-server';
import { fmtRatio, heading, table } from './support/report';
import { batchArgs, onePolicyArgs, RLF_SCRIPT, rlfArgs } from './support/scripts';
import { settings } from './support/settings';

/** Allow-all limit: never reached during the run. */
const BIG = 1_000_000;
const KEYS_RANGE = 10_000;
const BATCH = 16;
const MEASURED_CALLS = settings.quick ? 2_000 : 5_000;
/**
 * Calls before counting: enough that nearly every key was hit before (1 − e^(−4) ≈ 98 %), so the count is the
 * usual decision's, as in an app whose trackers come back within a window, not a key's first hit.
 */
const WARM_CALLS = 4 * KEYS_RANGE;
/**
 * Window of every case, an hour (rate-limiter-flexible's too): no key's window ends while a case runs, which a
 * minute's window did for some cases and not others (a run under callgrind takes ~20 s per case).
 */
const WINDOW_MS = 3_600_000;

/** What our one-policy fixed-window script sends, in its order, with constants where its logic would be. */
const FLOOR_SCRIPT = `local t = redis.call('TIME')
local b = redis.call('GET', KEYS[2])
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], '29000000:1', 'KEEPTTL')
return { t[1], 0, ${BIG - 1}, 60000, 60000 }`;
const FLOOR_WITHOUT_READS = FLOOR_SCRIPT.replace(/local b = .*\n/g, '');

interface Case {
  name: string;
  script?: string;
  args: (sha: string) => string[];
  /** Decisions per call (a batch's). */
  decisions: number;
  /** A function library to load instead of a script (`args` then calls its function). */
  library?: string;
}

function cases(): Case[] {
  const algorithms = new RateLimitAlgorithmRegistry().all();
  const fixedWindow = algorithms.find((a) => a.name === 'fixed-window')!;
  const oneCall = (tracker: string) => onePolicyArgs(fixedWindow, tracker, BIG, WINDOW_MS);
  const list: Case[] = [
    { name: 'INCR', args: () => ['INCR', 'incr:{__rand_int__}'], decisions: 1 },
    { name: 'EVALSHA of `return 1`, a one-policy call’s KEYS and ARGV', script: 'return 1', args: oneCall('__rand_int__'), decisions: 1 },
    { name: 'rate-limiter-flexible script', script: RLF_SCRIPT, args: rlfArgs('rlflx:{__rand_int__}', BIG, WINDOW_MS), decisions: 1 },
    { name: 'one-policy fixed-window’s commands, no logic', script: FLOOR_SCRIPT, args: oneCall('__rand_int__'), decisions: 1 },
    { name: '… without the lockout GET', script: FLOOR_WITHOUT_READS, args: oneCall('__rand_int__'), decisions: 1 },
  ];
  const library = composeOnePolicyLibrary(algorithms);
  for (const a of algorithms) {
    list.push({
      name: `one-policy ${a.name}`,
      script: composeOnePolicyScript(a),
      args: onePolicyArgs(a, '__rand_int__', BIG, WINDOW_MS),
      decisions: 1,
    });
    const evalsha = onePolicyArgs(a, '__rand_int__', BIG, WINDOW_MS);
    list.push({
      name: `one-policy ${a.name}, its function (FCALL)`,
      library: library.code,
      args: (sha) => ['FCALL', library.functions.get(a.name)!, ...evalsha(sha).slice(2)],
      decisions: 1,
    });
  }
  list.push({
    name: `decide.lua, ${BATCH} fixed-window decisions per call`,
    script: composeDecideScript([fixedWindow]),
    args: batchArgs(fixedWindow, '__rand_int__', BIG, BATCH, WINDOW_MS),
    decisions: BATCH,
  });
  return list;
}

/** redis-server under callgrind, instrumentation off until a case switches it on. */
async function startUnderCallgrind(dir: string): Promise<{ pid: number; port: number; client: Redis; stop: () => Promise<void> }> {
  const port = await freePort();
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      `--callgrind-out-file=${join(dir, 'cg.out')}`,
      'redis-server',
      '--port',
      String(port),
      '--save',
      '',
      '--appendonly',
      'no',
    ],
    { stdio: 'ignore' },
  );
  const client = new Redis({ port, lazyConnect: true, retryStrategy: () => null });
  // Refused connections until valgrind's redis-server listens: retried below, not reported.
  client.on('error', () => undefined);
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await client.connect();
      break;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  await client.ping();
  const stop = async () => {
    client.disconnect();
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  };
  return { pid: child.pid!, port, client, stop };
}

function benchmark(port: number, args: string[], calls: number): void {
  const out = spawnSync(
    'redis-benchmark',
    ['-p', String(port), '-c', '1', '-n', String(calls), '-P', '16', '-r', String(KEYS_RANGE), ...args],
    {
      encoding: 'utf8',
    },
  );
  if (out.status !== 0) throw new Error(`redis-benchmark failed: ${out.stderr || out.stdout}`);
}

/** Instructions since the counters were zeroed: callgrind_control dumps them to `<out>.<n>`, read once written. */
async function dumpedInstructions(dir: string, pid: number): Promise<number> {
  execFileSync('callgrind_control', ['-d', String(pid)], { stdio: 'ignore' });
  for (let i = 0; i < 300; i++) {
    const dump = readdirSync(dir).find((f) => /^cg\.out\.\d+$/.test(f));
    if (dump) {
      const totals = /^totals: (\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'));
      if (totals) {
        rmSync(join(dir, dump));
        return Number(totals[1]);
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('callgrind wrote no dump within 30 s');
}

async function main(): Promise<void> {
  if (spawnSync('valgrind', ['--version']).status !== 0)
    throw new Error('bench:redis-instructions needs valgrind: apt-get install -y valgrind');
  const dir = mkdtempSync(join(tmpdir(), 'redis-instructions-'));
  const redis = await startUnderCallgrind(dir);
  const rows: Array<{ name: string; perDecision: number }> = [];
  try {
    for (const c of cases()) {
      if (c.library !== undefined) await redis.client.function('LOAD', 'REPLACE', c.library);
      const sha = c.script === undefined ? '' : String(await redis.client.script('LOAD', c.script));
      const args = c.args(sha);
      // A script whose KEYS or ARGV no longer match would answer errors, counted as if they were decisions.
      await redis.client.call(args[0], ...args.slice(1).map((a) => a.replaceAll('__rand_int__', 'probe')));
      await redis.client.flushall();
      // A batch call decides 16 times as much, so it warms with 10,000 calls (~63 % of its keys seen before).
      benchmark(redis.port, args, c.decisions > 1 ? KEYS_RANGE : WARM_CALLS);
      execFileSync('callgrind_control', ['-z', String(redis.pid)], { stdio: 'ignore' });
      execFileSync('callgrind_control', ['-i', 'on', String(redis.pid)], { stdio: 'ignore' });
      benchmark(redis.port, args, MEASURED_CALLS);
      execFileSync('callgrind_control', ['-i', 'off', String(redis.pid)], { stdio: 'ignore' });
      rows.push({ name: c.name, perDecision: (await dumpedInstructions(dir, redis.pid)) / MEASURED_CALLS / c.decisions });
    }
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  const rlf = rows.find((r) => r.name === 'rate-limiter-flexible script')!.perDecision;
  heading('Redis instructions per decision (callgrind)', {
    calls: MEASURED_CALLS,
    keys: KEYS_RANGE,
    note: 'instructions redis-server executes per call (per decision for a batch), redis-benchmark -c 1 -P 16; × rlf = over rate-limiter-flexible’s script',
  });
  console.log(
    table(
      ['case', 'instructions per decision', '× rlf'],
      rows.map((r) => [r.name, Math.round(r.perDecision).toLocaleString('en-US'), fmtRatio(r.perDecision / rlf)]),
    ),
  );
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
