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
  return compose(ONE_POLICY, [algorithm], 'one-policy').replace(/^--@burst$/m, () =>
    algorithm.usesBurst ? "burst, token = tonumber(token), ''" : '',
  );
}

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
    const { helpers, check, commit, refund } = blocksOf(algorithm);
    parts.push(helpers);
    const decideOne = DECIDE_ONE_FUNCTION.replace(/^( *)--@check$/gm, (_, indent: string) => block(check, indent))
      .replace(/^( *)--@commit$/m, (_, indent: string) => block(commit, indent))
      .replace(/^( *)--@capacity$/m, (_, indent: string) => `${indent}local capacity = ${algorithm.usesBurst ? 'burst' : 'limit'}`);
    if (form === 'one-policy') {
      parts.push(decideOne);
      continue;
    }
    parts.push(`ALG[${algorithm.id}] = {
  burst = ${algorithm.usesBurst},
  check = function(key, cost, limit, window, burst, now, token)
    local ok, remaining, reset, retry, delay, more, s1, s2, s3, s4 = false, 0, 0, 0, 0, 0
${block(check, '    ')}
    return { ok, remaining, reset, retry, delay, s1, s2, s3, s4, more = more }
  end,
  commit = function(key, r, now, cost, limit, window, burst, token)
    local reset, s1, s2, s3, s4, more = r[3], r[6], r[7], r[8], r[9], r.more
${block(commit, '    ')}
    r.more = more
  end,
  refund = function(key, cost, limit, window, burst, now, token)
${indented(refund, '    ')}
  end,
}`);
    parts.push(decideOne.replace('local function decideOne(', `DECIDE_ONE[${algorithm.id}] = function(`));
  }
  return parts.join('\n');
}

/** An algorithm's fragment split at its block markers (decide.lua's header, "The fragment contract"). */
function blocksOf(algorithm: RateLimitAlgorithm): { helpers: string; check: string; commit: string; refund: string } {
  const parts = algorithm.lua.split(/^--@(?:check|commit|refund)$/m);
  if (parts.length !== 4) throw new Error(`${algorithm.name}.lua: expected --@check, --@commit and --@refund, in that order.`);
  const [helpers, check, commit, refund] = parts;
  return { helpers, check: check.trim(), commit: commit.trim(), refund: refund.trim() };
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
  scripts.set('decide.across-slots.lua', composeAcrossSlotsScript(algorithms));
  return scripts;
}
