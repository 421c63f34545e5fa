import type { AlgorithmParams, RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import type { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { Duration, RateLimitPolicy } from '../interfaces/policy.interface';
import { parseDuration } from './duration';
import { describeValue } from './describe-value';

/** A policy validated once, with everything that does not depend on the request already computed. */
export interface CompiledPolicy {
  readonly policy: RateLimitPolicy;
  readonly algorithm: RateLimitAlgorithm;
  readonly name: string;
  /** Key parts after the tracker: `<scope>:<name>:` then the algorithm's tag (state) or `b` (lockout). */
  readonly stateKeySuffix: string;
  readonly blockKeySuffix: string;
  readonly blockForMs: number;
  readonly shadow: boolean;
  /** Params when neither limit nor window is a function; otherwise computed per request. */
  readonly staticParams: AlgorithmParams | undefined;
  /** Cost when it is not a function. */
  readonly staticCost: number | undefined;
}

const KNOWN_FIELDS = new Set([
  'algorithm',
  'limit',
  'window',
  'name',
  'cost',
  'burst',
  'by',
  'blockFor',
  'scope',
  'countOnly',
  'mode',
  'delay',
  'onStoreError',
  'skipIf',
]);
const NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
/** Largest limit × window (ms) the integer arithmetic stays exact for, in Lua and in JavaScript. */
const MAX_SCALED = 2 ** 50;

/**
 * Validates a policy and precomputes what it can. `where` prefixes error messages (for example
 * `@RateLimit on CatsController.find`), `scopeKey` is the counter's scope when the policy has no `scope`.
 */
export function compilePolicy(
  policy: RateLimitPolicy,
  registry: RateLimitAlgorithmRegistry,
  where: string,
  scopeKey: string,
): CompiledPolicy {
  const fail = (message: string) => new RateLimitConfigError(`${where}: ${message}`);
  if (policy === null || typeof policy !== 'object')
    throw fail(`a policy must be an object such as { algorithm: 'fixed-window', limit: 100, window: '1m' }, got ${describeValue(policy)}.`);
  for (const field of Object.keys(policy)) {
    if (!KNOWN_FIELDS.has(field)) throw fail(`unknown policy field '${field}'; known fields are ${[...KNOWN_FIELDS].join(', ')}.`);
  }
  let algorithm: RateLimitAlgorithm;
  try {
    algorithm = registry.get(policy.algorithm);
  } catch (error) {
    throw fail((error as Error).message);
  }
  const name = policy.name ?? 'default';
  if (typeof name !== 'string' || !NAME_PATTERN.test(name))
    throw fail(`name: ${describeValue(name)} must be 1-64 characters of A-Z a-z 0-9 _ . -`);
  if (policy.scope !== undefined && (typeof policy.scope !== 'string' || !NAME_PATTERN.test(policy.scope))) {
    throw fail(`scope: ${describeValue(policy.scope)} must be 1-64 characters of A-Z a-z 0-9 _ . -`);
  }
  const at = (field: string) => `${where}: ${field}`;
  const blockForMs = policy.blockFor === undefined ? 0 : parseDuration(policy.blockFor, at('blockFor'));
  if (policy.burst !== undefined) positiveInteger(policy.burst, at('burst'));
  if (typeof policy.limit !== 'function') positiveInteger(policy.limit, at('limit'));
  if (typeof policy.window !== 'function') parseDuration(policy.window, at('window'));
  if (typeof policy.cost !== 'function' && policy.cost !== undefined) cost(policy.cost, at('cost'));
  if (policy.by !== undefined && policy.by !== 'ip' && policy.by !== 'user' && typeof policy.by !== 'function') {
    throw fail(`by: ${describeValue(policy.by)} must be 'ip', 'user' or a function of the ExecutionContext returning a string.`);
  }
  oneOf(policy.countOnly, ['failed', 'succeeded'], at('countOnly'));
  oneOf(policy.mode, ['enforce', 'shadow'], at('mode'));
  oneOf(policy.onStoreError, ['fail-open', 'fail-closed', 'insurance'], at('onStoreError'));
  if (policy.skipIf !== undefined && typeof policy.skipIf !== 'function') {
    throw fail(`skipIf: ${describeValue(policy.skipIf)} must be a function (context) => boolean | Promise<boolean>.`);
  }
  if (policy.delay !== undefined && typeof policy.delay !== 'boolean')
    throw fail(`delay: ${describeValue(policy.delay)} must be true or false.`);
  if (policy.countOnly && algorithm.name === 'concurrency')
    throw fail(`countOnly cannot be combined with 'concurrency': a lease is always given back when the work ends.`);

  const keySuffix = `${policy.scope === undefined ? scopeKey : `s=${policy.scope}`}:${name}:`;
  const compiled: CompiledPolicy = {
    policy,
    algorithm,
    name,
    stateKeySuffix: keySuffix + algorithm.keyTag,
    blockKeySuffix: `${keySuffix}b`,
    blockForMs,
    shadow: policy.mode === 'shadow',
    staticParams: undefined,
    staticCost: typeof policy.cost === 'function' ? undefined : (policy.cost ?? 1),
  };
  if (typeof policy.limit !== 'function' && typeof policy.window !== 'function') {
    return { ...compiled, staticParams: resolveParams(compiled, policy.limit, policy.window, where) };
  }
  return compiled;
}

/** Validates a (possibly per-request) limit and window and returns the algorithm's params. */
export function resolveParams(compiled: CompiledPolicy, limit: number, window: Duration, where: string): AlgorithmParams {
  positiveInteger(limit, `${where}: limit`);
  const windowMs = parseDuration(window, `${where}: window`);
  const burst = compiled.policy.burst ?? limit;
  const scaled = Math.max(limit, burst) * windowMs;
  if (scaled > MAX_SCALED) {
    throw new RateLimitConfigError(
      `${where}: limit × window is too large (${limit} × ${windowMs} ms); keep it at most 2^50, for example by using a shorter window with a proportionally smaller limit.`,
    );
  }
  return { limit, windowMs, burst };
}

/** Validates a cost: a whole number ≥ 0. */
export function cost(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new RateLimitConfigError(`${field}: ${describeValue(value)} must be a whole number of units ≥ 0.`);
  }
  return value;
}

function positiveInteger(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
    throw new RateLimitConfigError(`${field}: ${describeValue(value)} must be a whole number ≥ 1.`);
  }
  return value;
}

function oneOf(value: unknown, allowed: readonly string[], field: string): void {
  if (value !== undefined && !allowed.includes(value as string)) {
    throw new RateLimitConfigError(`${field}: ${describeValue(value)} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}.`);
  }
}
