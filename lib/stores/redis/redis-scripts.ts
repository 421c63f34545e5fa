import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import { VERDICT_PRELUDE } from '../verdicts';

const lua = (name: string) => readFileSync(join(__dirname, '..', '..', 'algorithms', name), 'utf8');
const DISPATCHER = lua('decide.lua');
const ONE_POLICY = lua('one-policy.lua');
const DECIDE_ONE = lua('decide-one.lua');
const BUCKET = lua('bucket.lua');
const STATE = lua('state.lua');

/** decide-one.lua's two parts: what stands before its function (written once per script), and the function. */
const DECIDE_ONE_START = DECIDE_ONE.indexOf('local function decideOne(');
const DECIDE_ONE_PRELUDE = DECIDE_ONE.slice(0, DECIDE_ONE_START);
const DECIDE_ONE_FUNCTION = DECIDE_ONE.slice(DECIDE_ONE_START);
/**
 * The function's body as the one-policy script writes it inline, where its parameters are the script's locals:
 * each `return` (all at the body's own level, none in a loop) a `break` out of `repeat … until true`.
 */
const DECIDE_ONE_INLINE = `repeat\n${DECIDE_ONE_FUNCTION.slice(
  DECIDE_ONE_FUNCTION.indexOf('\n') + 1,
  DECIDE_ONE_FUNCTION.lastIndexOf('\nend'),
).replace(/^( *)return$/gm, '$1break')}\nuntil true`;

/**
 * Builds the decision script for a set of algorithms: the dispatcher (algorithms/decide.lua) with the verdict
 * codes and, per algorithm, its fragment as `ALG[id]` and its instance of decide-one.lua as `DECIDE_ONE[id]`.
 * One script per algorithm keeps the common single-policy call lean; one with all of them serves routes whose
 * policies mix algorithms.
 */
export function composeDecideScript(algorithms: readonly RateLimitAlgorithm[]): string {
  return compose(DISPATCHER, algorithms, 'dispatcher');
}

/**
 * decide.lua for a Cluster's batch per master: one declared key routes the call, the others come after the JSON
 * argument (decide.lua's header, "Across slots"). Redis 7.0 and later; older servers fail to compile it.
 */
export function composeAcrossSlotsScript(algorithms: readonly RateLimitAlgorithm[]): string {
  return `#!lua flags=allow-cross-slot-keys\n${compose(DISPATCHER, algorithms, 'dispatcher', ACROSS_SLOTS_KEYS)}`;
}

/** The keys of a script across slots, read from ARGV[2 ..] (a loop: `unpack` is Lua 5.1's, `table.unpack` 5.2's). */
const ACROSS_SLOTS_KEYS = 'local KEYS = {}\nfor i = 2, #ARGV do KEYS[i - 1] = ARGV[i] end';

/**
 * Builds the script for one decision of one policy of `algorithm` (algorithms/one-policy.lua): what a quiet API, a
 * Cluster and `batch: false` send for nearly every request, without the general dispatcher's loop and error
 * slots, and with no closure per block of the algorithm.
 */
export function composeOnePolicyScript(algorithm: RateLimitAlgorithm): string {
  const { prelude, body } = onePolicyParts(algorithm);
  return prelude + body;
}

/**
 * The one-policy scripts of `algorithms` as one Redis function library (Redis ≥ 7.0, `FUNCTION LOAD`), a function
 * per algorithm: what stands before a script's call (its helpers) runs once, when the library loads, where an
 * `EVALSHA` builds every closure again on each call. The library's name and its functions' carry a hash of its
 * code, so two versions of the library loaded by a mixed fleet stand side by side.
 */
export function composeOnePolicyLibrary(algorithms: readonly RateLimitAlgorithm[]): OnePolicyLibrary {
  const parts = algorithms.map((algorithm) => ({ algorithm, ...onePolicyParts(algorithm) }));
  const hash = createHash('sha1')
    .update(parts.map(({ prelude, body }) => prelude + body).join('\n'))
    .digest('hex')
    .slice(0, 12);
  const functions = new Map<string, string>();
  const code = parts.map(({ algorithm, prelude, body }) => {
    const name = `rl_${hash}_${algorithm.keyTag}`;
    functions.set(algorithm.name, name);
    return `do\n${prelude}\nredis.register_function('${name}', function(KEYS, ARGV)\n${body}\nend)\nend`;
  });
  return { name: `ratelimit_${hash}`, code: `#!lua name=ratelimit_${hash}\n${code.join('\n')}\n`, functions };
}

/** A function library of the one-policy scripts ({@link composeOnePolicyLibrary}). */
export interface OnePolicyLibrary {
  /** The library's name, `ratelimit_<hash>`. */
  name: string;
  /** What `FUNCTION LOAD` gets. */
  code: string;
  /** Each algorithm's function, by algorithm name. */
  functions: ReadonlyMap<string, string>;
}

/** A one-policy script in two: its helpers (prelude) and what each call runs (body). */
function onePolicyParts(algorithm: RateLimitAlgorithm): { prelude: string; body: string } {
  const lazy = readsClockLazily(algorithm);
  const script = compose(ONE_POLICY, [algorithm], 'one-policy')
    .replace(/^--@decide$/m, () => withBlocks(DECIDE_ONE_INLINE, algorithm))
    .replace(/^--@clock$/m, () =>
      lazy
        ? `local now\nif ARGV[2] then\n  local t = redis.call('TIME')\n  now = ${CLOCK_MS}\nend`
        : `local t = redis.call('TIME')\nlocal now = ${CLOCK_MS}`,
    )
    .replace(/^--@burst$/m, () => (algorithm.usesBurst ? "burst, token = tonumber(token, 16), ''" : ''));
  const [prelude, body] = withoutUnusedHelpers(script).split(/^--@body\n/m);
  return { prelude, body };
}

/**
 * `script` without the top-level `local function`s it never calls (with the comment lines just above each):
 * Redis builds every closure a script defines again on each call, used or not.
 */
function withoutUnusedHelpers(script: string): string {
  let result = script;
  for (const [, name] of script.matchAll(/^local function (\w+)\(/gm)) {
    if (withoutComments(result).match(new RegExp(`\\b${name}\\b`, 'g'))!.length > 1) continue;
    // A one-line function ends on its own line; any other at the next line that is `end` alone.
    result = result.replace(new RegExp(`(?:^--.*\\n)*^local function ${name}\\((?:.* end|.*\\n(?:(?!end$).*\\n)*end)\\n`, 'm'), '');
  }
  return result;
}

/** Lua without its comments (`--[[ … ]]` blocks and `--` to the end of a line), for counting what the code names. */
function withoutComments(lua: string): string {
  return lua.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--.*$/gm, '');
}

/** The server's clock in ms, from TIME's reply `t`. */
const CLOCK_MS = 'tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)';

/**
 * decide-one.lua's `--@now`: where `now` is needed and a one-policy call may not have read it yet (see
 * {@link readsClockLazily}), it is read then, once, and replied in reply[1].
 */
const READ_CLOCK_ONCE = (indent: string) =>
  [
    `${indent}if not now then`,
    `${indent}  local t = redis.call('TIME')`,
    `${indent}  now = ${CLOCK_MS}`,
    `${indent}  reply[1] = now`,
    `${indent}end`,
  ].join('\n');

/**
 * Whether an algorithm's check reads the clock only when it needs it (its check holds `--@now`: fixed-window,
 * whose counter's TTL is the rest of its window), so its one-policy call reads it only then.
 */
export function readsClockLazily(algorithm: RateLimitAlgorithm): boolean {
  let lazy = LAZY.get(algorithm);
  if (lazy === undefined) LAZY.set(algorithm, (lazy = /^ *--@now$/m.test(algorithm.lua)));
  return lazy;
}

const LAZY = new WeakMap<RateLimitAlgorithm, boolean>();

/** `host` with its markers replaced: where its keys come from, the `VERDICT_*` locals, the fragments. */
function compose(host: string, algorithms: readonly RateLimitAlgorithm[], form: 'dispatcher' | 'one-policy', keys = ''): string {
  return host
    .replace(/^--@keys$/m, () => keys)
    .replace(/^--@verdicts$/m, () => VERDICT_PRELUDE)
    .replace(/^--@fragments$/m, () => fragmentsOf(algorithms, form));
}

/**
 * The shared helpers the algorithms need, decide-one.lua's prelude, then per algorithm its helpers and blocks:
 * in the dispatcher as `ALG[id]` and `DECIDE_ONE[id]`, in the one-policy script as its `decideOne` alone.
 */
function fragmentsOf(algorithms: readonly RateLimitAlgorithm[], form: 'dispatcher' | 'one-policy'): string {
  const parts: string[] = [];
  if (algorithms.some((a) => a.redisType === 'string')) parts.push(STATE);
  if (algorithms.some((a) => a.usesBurst)) parts.push(BUCKET);
  parts.push(DECIDE_ONE_PRELUDE);
  for (const algorithm of algorithms) {
    const { helpers, check, commit, refund, undo, lock } = blocksOf(algorithm);
    parts.push(helpers);
    // The one-policy script writes the decision inline where its host's marker stands (composeOnePolicyScript).
    if (form === 'one-policy') continue;
    const decideOne = withBlocks(DECIDE_ONE_FUNCTION, algorithm);
    parts.push(`ALG[${algorithm.id}] = {
  burst = ${algorithm.usesBurst},
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4, mark = false, 0, 0, 0, 0, 0
${block(check.replace(/^ *--@now\n/gm, ''), '    ')}
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
${block(commit, '    ')}
    r.more = more
  end,
  undo = function(key, r)
${undo ? block(`local s1, s2, s3, s4 = r[6], r[7], r[8], r[9]\n${undo}`, '    ') : ''}
  end,
  lock = function(key)
${lock ? block(lock, '    ') : ''}
  end,
  refund = function(key, cost, limit, window, burst, now, token)
${indented(refund, '    ')}
  end,
}`);
    parts.push(decideOne.replace('local function decideOne(', `DECIDE_ONE[${algorithm.id}] = function(`));
  }
  return parts.join('\n');
}

/** decide-one.lua's function (or its inline body) with `algorithm`'s blocks written in where its markers stand. */
function withBlocks(template: string, algorithm: RateLimitAlgorithm): string {
  const { check, commit, undo, lock } = blocksOf(algorithm);
  return template
    .replace(/^( *)--@check$/gm, (_, indent: string) => block(check, indent))
    .replace(/^( *)--@commit$/m, (_, indent: string) => block(commit, indent))
    .replace(/^( *)--@undo\n/gm, (_, indent: string) => (undo ? `${block(undo, indent)}\n` : ''))
    .replace(/^( *)--@lock\n/m, (_, indent: string) => (lock ? `${block(lock, indent)}\n` : ''))
    .replace(/^( *)--@capacity$/m, (_, indent: string) => `${indent}local capacity = ${algorithm.usesBurst ? 'burst' : 'limit'}`)
    .replace(/^( *)--@now$/gm, (_, indent: string) => READ_CLOCK_ONCE(indent));
}

/**
 * An algorithm's fragment split at its block markers (decide.lua's header, "The fragment contract"): check,
 * commit and refund, then undo and lock where its check charges at once or its state carries a lockout's mark.
 */
function blocksOf(algorithm: RateLimitAlgorithm): {
  helpers: string;
  check: string;
  commit: string;
  refund: string;
  undo: string;
  lock: string;
} {
  const parts = algorithm.lua.split(/^--@(check|commit|refund|undo|lock)$/m);
  const names = parts.filter((_, i) => i % 2 === 1).join(' ');
  if (names !== 'check commit refund' && names !== 'check commit undo lock refund')
    throw new Error(`${algorithm.name}.lua: expected --@check, --@commit, [--@undo, --@lock,] --@refund, in that order; found ${names}.`);
  const block = (name: string) => {
    const at = parts.indexOf(name, 1);
    return at < 0 ? '' : parts[at + 1].trim();
  };
  return {
    helpers: parts[0],
    check: block('check'),
    commit: block('commit'),
    refund: block('refund'),
    undo: block('undo'),
    lock: block('lock'),
  };
}

/** A block in its own scope (`do … end`: its locals stay its own), indented as the marker it replaces. */
function block(code: string, indent: string): string {
  return `${indent}do\n${indented(code, `${indent}  `)}\n${indent}end`;
}

function indented(code: string, indent: string): string {
  return code
    .split('\n')
    .map((line) => (line === '' ? line : indent + line))
    .join('\n');
}

/**
 * Every decision script the store composes for `algorithms`, by file name: what docs/scripts/ holds
 * (`npm run assemble-scripts`), so a reviewer reads each as Redis receives it.
 */
export function assembledScripts(algorithms: readonly RateLimitAlgorithm[]): Map<string, string> {
  const scripts = new Map<string, string>();
  for (const algorithm of algorithms) {
    scripts.set(`one-policy.${algorithm.name}.lua`, composeOnePolicyScript(algorithm));
    scripts.set(`decide.${algorithm.name}.lua`, composeDecideScript([algorithm]));
  }
  scripts.set('decide.all.lua', composeDecideScript(algorithms));
  scripts.set('one-policy.library.lua', composeOnePolicyLibrary(algorithms).code);
  scripts.set('decide.across-slots.lua', composeAcrossSlotsScript(algorithms));
  return scripts;
}
