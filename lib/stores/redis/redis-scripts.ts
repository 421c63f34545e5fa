import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import { VERDICT_PRELUDE } from '../verdicts';

const DISPATCHER = readFileSync(join(__dirname, '..', '..', 'algorithms', 'decide.lua'), 'utf8');
const LONE = readFileSync(join(__dirname, '..', '..', 'algorithms', 'lone.lua'), 'utf8');
const DECIDE_ONE = readFileSync(join(__dirname, '..', '..', 'algorithms', 'decide-one.lua'), 'utf8');
const BUCKET = readFileSync(join(__dirname, '..', '..', 'algorithms', 'bucket.lua'), 'utf8');
const STATE = readFileSync(join(__dirname, '..', '..', 'algorithms', 'state.lua'), 'utf8');

/**
 * Builds the decision script for a set of algorithms: the dispatcher (algorithms/decide.lua) with the verdict
 * codes, their fragments and decide-one.lua spliced in where its markers stand. One script per algorithm keeps
 * the common single-policy call lean; one with all of them serves routes whose policies mix algorithms.
 */
export function composeDecideScript(algorithms: readonly RateLimitAlgorithm[]): string {
  return compose(DISPATCHER, algorithms);
}

/**
 * decide.lua for a Cluster's batch per master: one declared key routes the call, the others come after the JSON
 * argument (decide.lua's header, "Across slots"). Redis 7.0 and later; older servers fail to compile it.
 */
export function composeAcrossSlotsScript(algorithms: readonly RateLimitAlgorithm[]): string {
  return `#!lua flags=allow-cross-slot-keys\n${compose(DISPATCHER, algorithms, ACROSS_SLOTS_KEYS)}`;
}

/** The keys of a script across slots, read from ARGV[2 ..] (a loop: `unpack` is Lua 5.1's, `table.unpack` 5.2's). */
const ACROSS_SLOTS_KEYS = 'local KEYS = {}\nfor i = 2, #ARGV do KEYS[i - 1] = ARGV[i] end';

/**
 * Builds the script for one decision of one policy of `algorithm` (algorithms/lone.lua): what a quiet API, a
 * Cluster and `batch: false` send for nearly every request, without the general dispatcher's loop and error
 * slots.
 */
export function composeLoneScript(algorithm: RateLimitAlgorithm): string {
  return compose(LONE, [algorithm]);
}

/** `host` with its markers replaced: where its keys come from, the `VERDICT_*` locals, the algorithms' fragments, decide-one.lua. */
function compose(host: string, algorithms: readonly RateLimitAlgorithm[], keys = ''): string {
  return host
    .replace('--@keys', () => keys)
    .replace('--@verdicts', () => VERDICT_PRELUDE)
    .replace('--@fragments', () => fragmentsOf(algorithms))
    .replace('--@decide-one', () => DECIDE_ONE);
}

function fragmentsOf(algorithms: readonly RateLimitAlgorithm[]): string {
  const fragments = algorithms.map((a) => a.lua);
  if (algorithms.some((a) => a.usesBurst)) fragments.unshift(BUCKET);
  if (algorithms.some((a) => a.redisType === 'string')) fragments.unshift(STATE);
  return fragments.join('\n');
}
