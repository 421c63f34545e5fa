/**
 * The rules a decision script must meet to run on Valkey and Dragonfly as well as on Redis, checked over the
 * scripts as they are now (every `.lua` file of lib/algorithms and the scripts the store composes from them):
 *  1. No construct of one Lua version only: Redis and Valkey run Lua 5.1, Dragonfly Lua 5.4. (Neither server
 *     can be installed here: Debian 12 packages neither.)
 *  2. Under a stock Lua 5.4 (`lua5.4`, test/support/lua54-harness.lua), the scripts compile, send exactly the
 *     commands and arguments they sent on the real redis-server (Lua 5.1), and give the same replies, over
 *     representative decisions of every mode and algorithm (single, multi-policy and batched calls; consume,
 *     peek, refund, lockout, penalty; lockouts, concurrency leases, calendar windows, escalating lockouts).
 *     Each call runs on redis-server first with every command and its reply recorded; under Lua 5.4, the
 *     commands are answered with those replies, so what Redis does comes from redis-server alone; and
 *  3. every key a command touches is one of the call's KEYS (Dragonfly refuses undeclared keys), every
 *     number passed to `redis.call` or returned is an integer (Lua 5.4 keeps floats apart: Dragonfly sends a
 *     float argument as %.17g and replies a float as a double, where Lua 5.1 Redis truncates), and no global
 *     is read or created.
 * NOSCRIPT recovery and script-cache eviction are covered per client in clients.redis.spec.ts.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitCriticality } from '../../lib/interfaces/overload.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { DecideCall, isOnePolicy, onePolicyCall, luaScript, type LuaScript } from '../../lib/stores/redis/redis-codec';
import { composeAcrossSlotsScript, composeDecideScript, composeOnePolicyScript } from '../../lib/stores/redis/redis-scripts';
import type { RateLimitCall } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';
import { compilePolicy, type CompiledPolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { startRedis, type RedisProcess } from '../support/redis-server';

const ALGORITHM_DIR = join(__dirname, '..', '..', 'lib', 'algorithms');
const HARNESS = join(__dirname, '..', 'support', 'lua54-harness.lua');
const PREFIX = 'rules';
const registry = new RateLimitAlgorithmRegistry();
const engine = new RateLimitEngine(new MemoryStore());

/** One script call: which script, its keys and arguments (one JSON array per decision). */
interface ScriptCall {
  script: LuaScript;
  keys: string[];
  args: string[];
}

/** A call as redis-server ran it: its reply, and each command the script sent with the server's reply to it. */
interface RecordedCall extends ScriptCall {
  /** The script's reply, or what it raised. */
  reply: unknown;
  error?: string;
  commands: unknown[];
}

/** What the harness printed for one call. */
interface HarnessResult {
  reply: unknown;
  error: string | null;
  violations: string[];
}

let redis: RedisProcess;
let admin: Redis;

beforeAll(async () => {
  const lua = spawnSync('lua5.4', ['-v'], { encoding: 'utf8' });
  if (lua.status !== 0) throw new Error(`lua5.4 is needed for these checks (apt-get install lua5.4): ${lua.error?.message ?? lua.stderr}`);
  redis = await startRedis();
  admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
}, 30_000);

afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

/** A script's code without its comments (`--[[ … ]]` blocks and `--` lines), strings kept. */
function code(lua: string): string {
  return lua.replace(/--\[(=*)\[[\s\S]*?\]\1\]/g, '').replace(/--[^\n]*/g, '');
}

/** Constructs of one Lua version only: 5.1's that 5.4 removed, and 5.2+'s that 5.1 cannot parse. */
const VERSION_ONLY: Array<[RegExp, string]> = [
  [/(?<![.\w])unpack\s*\(/, 'unpack (5.1 only; table.unpack is 5.2+: use one that exists on both)'],
  [/\bsetfenv\b|\bgetfenv\b/, 'setfenv / getfenv (5.1 only)'],
  [/\bloadstring\b/, 'loadstring (5.1 only)'],
  [/\btable\.getn\b|\btable\.setn\b|\btable\.maxn\b/, 'table.getn / setn / maxn (5.1 only)'],
  [/\bmath\.mod\b|\bmath\.pow\b|\bmath\.ldexp\b|\bmath\.frexp\b|\bmath\.cosh\b/, 'math.mod / pow / ldexp / frexp / cosh (gone in 5.4)'],
  [/\bstring\.gfind\b|\bmodule\s*\(/, 'string.gfind / module (5.1 only)'],
  [/\/\/|(?<![<>~=])[&|~](?!=)|<<|>>/, 'integer division or bitwise operator (5.3+, a syntax error in 5.1)'],
  [/\bgoto\b|::\w+::/, 'goto / labels (5.2+)'],
  [/\bmath\.tointeger\b|\bmath\.type\b|\butf8\./, 'math.tointeger / math.type / utf8 (5.3+)'],
  [/\bbit32\.|\bbit\./, 'bit / bit32 libraries (not on every server)'],
];

describe('Lua version portability (static)', () => {
  const files = readdirSync(ALGORITHM_DIR).filter((f) => f.endsWith('.lua'));

  it('finds the scripts', () => {
    expect(files).toEqual(expect.arrayContaining(['decide.lua', 'fixed-window.lua', 'gcra.lua', 'concurrency.lua']));
  });

  it('no construct of one Lua version only, in any script', () => {
    const offences = files.flatMap((file) => {
      const lines = code(readFileSync(join(ALGORITHM_DIR, file), 'utf8')).split('\n');
      return lines.flatMap((line, i) =>
        VERSION_ONLY.filter(([pattern]) => pattern.test(line.replace(/'[^']*'|"[^"]*"/g, "''"))).map(
          ([, what]) => `${file}:${i + 1}: ${what}: ${line.trim()}`,
        ),
      );
    });
    expect(offences).toEqual([]);
  });
});

/**
 * `lua` made to record, for redis-server: each `redis.call` / `redis.pcall` goes through one that notes the
 * command (arguments as Redis formats numbers, `%.17g`) and the server's reply (integers tagged, so none is
 * rounded by cjson), and the script's reply comes back with the record: `{ 1, reply, record }`, or
 * `{ 0, error, record }` when the script raised.
 */
function recording(lua: string): string {
  // A shebang (a script across slots) stays the first line, as Redis requires.
  const shebang = /^#![^\n]*\n/.exec(lua)?.[0] ?? '';
  const body = lua
    .slice(shebang.length)
    .replace(/redis\.call\(/g, '__record(true, ')
    .replace(/redis\.pcall\(/g, '__record(false, ');
  return `${shebang}local __log = {}
local function __tag(v)
  if type(v) == 'number' then return { n = string.format('%.17g', v) } end
  if type(v) ~= 'table' or v.ok or v.err then return v end
  local out = {}
  for i = 1, #v do out[i] = __tag(v[i]) end
  return out
end
local function __record(raise, ...)
  local sent = {}
  for i = 1, select('#', ...) do
    local a = select(i, ...)
    sent[i] = type(a) == 'number' and string.format('%.17g', a) or a
  end
  local reply = redis.pcall(...)
  __log[#__log + 1] = { sent, __tag(reply) }
  if raise and type(reply) == 'table' and reply.err then error(reply) end
  return reply
end
local __ok, __reply = pcall(function()
${body}
end)
if not __ok then return { 0, type(__reply) == 'table' and __reply.err or tostring(__reply), cjson.encode(__log) } end
return { 1, __reply, cjson.encode(__log) }`;
}

/** Runs `call` on redis-server, recording every command the script sends and the server's reply to it. */
async function onRedisRecorded(call: ScriptCall): Promise<RecordedCall> {
  const [ok, reply, log] = (await admin.eval(recording(call.script.lua), call.keys.length, ...call.keys, ...call.args)) as [
    number,
    unknown,
    string,
  ];
  const commands = JSON.parse(log) as unknown[];
  return ok === 1 ? { ...call, reply, commands } : { ...call, reply: null, error: String(reply), commands };
}

/** Runs recorded `calls` in order through the Lua 5.4 harness; cjson gives whole numbers as integers or floats. */
function runUnderLua54(calls: readonly RecordedCall[], cjsonIntegers: boolean): HarnessResult[] {
  const scripts = [...new Set(calls.map((c) => c.script.lua))];
  const input = {
    cjsonIntegers,
    scripts,
    calls: calls.map((c) => ({ script: scripts.indexOf(c.script.lua) + 1, keys: c.keys, argv: c.args, commands: c.commands })),
  };
  const run = spawnSync('lua5.4', [HARNESS], { input: JSON.stringify(input), encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (run.status !== 0) throw new Error(`lua5.4 harness failed (${run.status}): ${run.stderr}\n${run.stdout.slice(0, 2000)}`);
  return run.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as HarnessResult);
}

/** A deterministic pseudo-random sequence (xorshift), so every run checks the same decisions. */
function random(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Every algorithm, with windows short enough to roll over during a trace, lockouts, bursts, a calendar window,
 * and reserves (a decision's criticality holds units back: see callsOf).
 */
const POLICIES: RateLimitPolicy[] = [
  { algorithm: 'fixed-window', limit: 3, window: 120, name: 'fw', reserve: { critical: 0.34 } },
  { algorithm: 'fixed-window', limit: 2, window: { calendar: 'day', timeZone: 'Europe/Paris' }, name: 'fwcal' },
  { algorithm: 'sliding-window', limit: 4, window: 150, name: 'sw', blockFor: 60, reserve: { critical: 0.25, default: 0.25 } },
  { algorithm: 'sliding-log', limit: 3, window: 100, name: 'sl' },
  { algorithm: 'token-bucket', limit: 2, window: 100, burst: 4, name: 'tb', reserve: { default: 0.5 } },
  { algorithm: 'gcra', limit: 3, window: 90, burst: 2, name: 'gc', blockFor: 50, escalate: { max: 400, forgiveAfter: 1_000 } },
  { algorithm: 'leaky-bucket', limit: 2, window: 80, burst: 3, name: 'lb', reserve: { critical: 0.3 } },
  { algorithm: 'concurrency', limit: 2, window: 200, name: 'cc', reserve: { critical: 0.5 } },
  // A plain lockout: a single-policy decision of it goes to the one-policy script (an escalating one never does).
  { algorithm: 'gcra', limit: 2, window: 60, burst: 2, name: 'gc2', blockFor: 30, reserve: { critical: 0.5 } },
];

const compiled: CompiledPolicy[] = POLICIES.map((p) => compilePolicy(p, registry, 'script-rules', 'svc'));
const lean = new Map(registry.all().map((a) => [a.name, luaScript(composeDecideScript([a]))]));
const onePolicy = new Map(registry.all().map((a) => [a.name, luaScript(composeOnePolicyScript(a))]));
const all = luaScript(composeDecideScript(registry.all()));
const acrossSlots = luaScript(composeAcrossSlotsScript(registry.all()));

/**
 * One decision's calls for `policies` (indexes into POLICIES) of `tracker`, made by a call of `criticality`
 * (policies with a reserve hold units back from a 'default' or 'sheddable' one); concurrency leases get `token`.
 */
function callsOf(
  policies: readonly number[],
  tracker: string,
  cost: number,
  token: string,
  criticality: RateLimitCriticality,
): RateLimitCall[] {
  return engine.calls(
    trackerKeyPrefix(PREFIX, tracker),
    policies.map((i) => ({ compiled: compiled[i], params: compiled[i].staticParams!, cost, token })),
    criticality,
  );
}

/** A step's criticality, from its index (no draw of its own, so the trace's draws stay those it had). */
const CRITICALITIES: readonly RateLimitCriticality[] = ['critical', 'default', 'sheddable'];

/**
 * A step of a trace: one script call of one or several decisions (a batch, as the store sends a tick's
 * decisions), with the script the store would pick: a one-policy decision's, a single policy's, the general one, or
 * for a batch the general one across slots (on a standalone server, which lets a script reach any key).
 */
function step(next: () => number, t: number): ScriptCall {
  const pick = <T>(list: readonly T[]) => list[Math.floor(next() * list.length)];
  const decisions = next() < 0.2 ? 3 : 1;
  const call = new DecideCall();
  let single: RateLimitCall[] | undefined;
  for (let d = 0; d < decisions; d++) {
    const count = next() < 0.25 ? 2 + Math.floor(next() * 3) : 1;
    const chosen = [...new Set(Array.from({ length: count }, () => Math.floor(next() * POLICIES.length)))];
    const tracker = `${pick(['alice', 'bob', 'carol'])}-${d}`;
    const cost = pick([0, 1, 1, 1, 2, 3, 6]);
    const calls = callsOf(chosen, tracker, cost, `lease-${Math.floor(next() * 3)}`, CRITICALITIES[(t + d) % 3]);
    const mode = pick(['c', 'c', 'c', 'p', 'r', 'b', 'x']);
    if (decisions === 1 && isOnePolicy(calls, mode)) {
      return { script: onePolicy.get(calls[0].algorithm.name)!, ...onePolicyCall(calls[0], mode) };
    }
    call.add(mode === 'b' ? calls.map((c) => ({ ...c, blockForMs: 40 + (t % 3) * 10 })) : calls, mode);
    single = calls;
  }
  // Half the batches go as a Cluster's batch per master would: one declared key, the others after the JSON.
  if (decisions > 1 && next() < 0.5) return { script: acrossSlots, keys: [call.keys[0]], args: [...call.args, ...call.keys] };
  const script = decisions === 1 && single!.length === 1 ? lean.get(single![0].algorithm.name)! : all;
  return { script, keys: call.keys, args: call.args };
}

/**
 * A decide.lua call's decisions, each as its mode then, per policy, its shape's six values, its hold (a seventh
 * value, written only when not 0) and its token.
 */
function decisionsOf(args: readonly string[]): unknown[][] {
  const [shapes, ...flat] = JSON.parse(args[0]) as [unknown[][], ...unknown[]];
  const decisions: unknown[][] = [];
  for (let d = 0; d < flat.length; d += 2 + 2 * (flat[d + 1] as number)) {
    const policies = Array.from({ length: flat[d + 1] as number }, (_, i) => {
      const shape = shapes[(flat[d + 2 + 2 * i] as number) - 1];
      return [...shape.slice(0, 6), shape[6] ?? 0, flat[d + 3 + 2 * i]];
    });
    decisions.push([flat[d], ...policies.flat()]);
  }
  return decisions;
}

describe('the Lua 5.4 harness catches what it checks', () => {
  it('an undeclared key, a float argument and reply, a global, and 5.1-only unpack', async () => {
    const broken = luaScript(
      "redis.call('SET', KEYS[1], 7 / 2) redis.call('GET', 'elsewhere') counter = 1 return { 5 / 2, unpack({ 1 }) }",
    );
    const recorded = await onRedisRecorded({ script: broken, keys: ['declared'], args: [] });
    // redis-server refused the global too (7.0: "Attempt to modify a readonly table"), after the same two commands.
    expect(recorded.error).toMatch(/readonly table|create global variable/);
    expect(recorded.commands).toHaveLength(2);
    const [result] = runUnderLua54([recorded], true);
    expect(result.violations).toEqual([
      'float argument 3.5 to SET (Lua 5.4 keeps it a float: Dragonfly sends it as %.17g, so 3.0 and 3 differ in type)',
      'undeclared key "elsewhere" in GET',
    ]);
    expect(result.error).toBe("user_script:1: Script attempted to create global variable 'counter'");
    const [unpacked] = runUnderLua54(
      [await onRedisRecorded({ script: luaScript('return { 5 / 2, unpack({ 1 }) }'), keys: [], args: [] })],
      true,
    );
    expect(unpacked.error).toBe("user_script:1: Script attempted to access nonexistent global variable 'unpack'");
    const [floats] = runUnderLua54([await onRedisRecorded({ script: luaScript('return { 5 / 2, 4 / 2 }'), keys: [], args: [] })], true);
    expect(floats).toEqual({
      reply: [2, 2],
      error: null,
      violations: [
        'float reply 2.5 (Lua 5.1 Redis truncates it to an integer; Dragonfly replies a double)',
        'float reply 2 (Lua 5.1 Redis truncates it to an integer; Dragonfly replies a double)',
      ],
    });
  });

  it('a command or argument other than the one redis-server ran, and more or fewer commands', async () => {
    const recorded = await onRedisRecorded({ script: luaScript("return redis.call('INCRBY', KEYS[1], 2)"), keys: ['counted'], args: [] });
    const other = (lua: string) => runUnderLua54([{ ...recorded, script: luaScript(lua) }], true)[0];
    expect(other("return redis.call('INCRBY', KEYS[1], 3)").violations).toEqual([
      'command 1 differs: INCRBY counted 3 here, INCRBY counted 2 on redis-server',
    ]);
    expect(other('return 1').violations).toEqual(['0 commands here, 1 on redis-server']);
    expect(other("redis.call('INCRBY', KEYS[1], 2) return redis.call('GET', KEYS[1])").error).toBe(
      'harness: the script sent more commands than redis-server ran (GET)',
    );
    // The same script replays redis-server's reply.
    expect(runUnderLua54([recorded], true)[0]).toEqual({ reply: recorded.reply, error: null, violations: [] });
  });
});

describe('under Lua 5.4, the scripts reply as Redis does and keep the rules', () => {
  /** Runs a trace of `steps` random steps on the real redis-server, sleeping 0-25 ms between steps. */
  async function onRedis(seed: number, steps: number): Promise<RecordedCall[]> {
    const next = random(seed);
    const done: RecordedCall[] = [];
    for (let t = 0; t < steps; t++) {
      const call = await onRedisRecorded(step(next, t));
      if (call.error !== undefined) throw new Error(`redis-server failed a traced call: ${call.error}`);
      done.push(call);
      const gap = next();
      if (gap < 0.7) await sleep(Math.floor(gap * 35));
    }
    return done;
  }

  let trace: RecordedCall[];

  beforeAll(async () => {
    trace = [];
    for (const seed of [7, 1_009, 65_537]) trace.push(...(await onRedis(seed, 120)));
  }, 60_000);

  it('the trace covers every algorithm, every mode, batches and multi-policy decisions', () => {
    const onePolicyIds = new Map(registry.all().map((a) => [onePolicy.get(a.name)!.sha, a.id]));
    // decide.lua's calls carry one JSON array (the shapes, then per decision: mode, n, per policy its shape
    // and token); a one-policy call its values joined by spaces ('p' for a peek).
    const general = trace.filter((c) => !onePolicyIds.has(c.script.sha));
    const decisions = general.flatMap((c) => decisionsOf(c.args));
    expect(new Set(decisions.map((d) => d[0]))).toEqual(new Set([1, 2, 3, 4, 5]));
    const ids = new Set(decisions.flatMap((d) => d.filter((_, i) => i % 8 === 1)));
    expect(ids).toEqual(new Set(registry.all().map((a) => a.id)));
    // Every algorithm's one-policy script ran, consuming and peeking.
    const onePolicyRuns = new Set(
      trace
        .filter((c) => onePolicyIds.has(c.script.sha))
        .map((c) => `${onePolicyIds.get(c.script.sha)}${c.args[0].split(' ')[3] === 'p' ? 'p' : 'c'}`),
    );
    expect(onePolicyRuns).toEqual(new Set(registry.all().flatMap((a) => [`${a.id}c`, `${a.id}p`])));
    expect(general.some((c) => decisionsOf(c.args).length === 3)).toBe(true);
    // Batches ran both ways: declaring every key, and across slots (ARGV[2 ..]).
    expect(general.filter((c) => c.script === acrossSlots && decisionsOf(c.args).length === 3).length).toBeGreaterThan(2);
    expect(general.filter((c) => c.script === all && decisionsOf(c.args).length === 3).length).toBeGreaterThan(2);
    expect(decisions.some((d) => d.length > 9)).toBe(true);
    // Rejections, lockouts and cost > capacity happened (each status in some reply: a one-policy reply's is its second value).
    const statuses = new Set(
      trace.flatMap((c) =>
        (c.reply as unknown[]).filter((_, i) => (onePolicyIds.has(c.script.sha) ? i === 1 : i > 0 && (i - 1) % 6 === 0)),
      ),
    );
    const rejections = [Verdict.Limited, Verdict.Blocked, Verdict.CostExceedsCapacity, Verdict.Reserved];
    expect(rejections.filter((s) => statuses.has(s))).toEqual(rejections);
    // Holds went both ways: a seventh value of a shape, and `<cost>+<hold>` in a one-policy argument.
    const holds = decisions.flatMap((d) => d.filter((_, i) => i % 8 === 7));
    expect(holds.some((h) => (h as number) > 0)).toBe(true);
    const heldOnePolicy = trace.filter((c) => onePolicyIds.has(c.script.sha) && /^\d+\+\d+ /.test(c.args[0]));
    expect(new Set(heldOnePolicy.map((c) => c.args[0].split(' ')[3] === 'p'))).toEqual(new Set([true, false]));
  });

  it('cjson giving whole numbers as integers (Dragonfly): the same replies as redis-server, no undeclared key, no float, no global', () => {
    const results = runUnderLua54(trace, true);
    expect(results.map((r) => r.error).filter((e) => e !== null)).toEqual([]);
    expect([...new Set(results.flatMap((r) => r.violations))]).toEqual([]);
    const mismatches = trace.flatMap((call, i) =>
      JSON.stringify(results[i].reply) === JSON.stringify(call.reply)
        ? []
        : [{ call: i, args: call.args, redis: call.reply, lua54: results[i].reply }],
    );
    expect(mismatches).toEqual([]);
  });

  it('cjson giving every number as a float (lua-cjson as Redis ships it, built for 5.4): the same replies; floats appear, all whole', () => {
    const results = runUnderLua54(trace, false);
    expect(results.map((r) => r.error).filter((e) => e !== null)).toEqual([]);
    const violations = [...new Set(results.flatMap((r) => r.violations))];
    // Numbers derived from the arguments are floats then, but whole: %.17g prints them as Redis prints integers,
    // and a server that truncates float replies (Lua 5.1 Redis, Dragonfly with lua_resp2_legacy_float) replies the same.
    expect(violations.filter((v) => !/^float (argument|reply) -?\d+ /.test(v))).toEqual([]);
    expect(violations.length).toBeGreaterThan(0);
    const mismatches = trace.filter((call, i) => JSON.stringify(results[i].reply) !== JSON.stringify(call.reply));
    expect(mismatches).toEqual([]);
  });
});
