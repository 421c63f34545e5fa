import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import {
  RATE_LIMIT_CRITICALITIES,
  type RateLimitAdaptivePolicy,
  type RateLimitAdaptiveStrategy,
  type RateLimitCriticality,
} from '../interfaces/overload.interface';
import { NAME_PATTERN } from '../policy/compile-policy';
import { describeValue } from '../shared/describe-value';
import { AdaptiveLimiter, type AdaptiveWindowOptions } from './adaptive-limiter';
import type { AdaptiveStrategy } from './adaptive-strategy';
import { AimdStrategy } from './aimd.strategy';
import { GradientStrategy } from './gradient.strategy';
import { VegasStrategy } from './vegas.strategy';

const KNOWN_FIELDS = ['algorithm', 'limit', 'name', 'adaptive'];
const KNOWN_ADAPTIVE_FIELDS = ['strategy', 'min', 'initial', 'partitions'];
const STRATEGIES: readonly RateLimitAdaptiveStrategy[] = ['vegas', 'gradient', 'aimd'];
/** concurrency-limits' floors: VegasLimit has none but 1, Gradient2Limit and AIMDLimit 20. */
const JAVA_MIN: Readonly<Record<RateLimitAdaptiveStrategy, number>> = { vegas: 1, gradient: 20, aimd: 20 };
/** concurrency-limits' initial limit, for every strategy. */
const JAVA_INITIAL = 20;

/** Whether `policy` is an adaptive one (`algorithm: 'adaptive'`), which the store never sees. */
export function isAdaptivePolicy(policy: unknown): policy is RateLimitAdaptivePolicy {
  return typeof policy === 'object' && policy !== null && (policy as { algorithm?: unknown }).algorithm === 'adaptive';
}

/** An adaptive policy, validated, with its defaults filled in. */
export interface CompiledAdaptivePolicy {
  readonly name: string;
  /** The ceiling. */
  readonly limit: number;
  readonly strategy: RateLimitAdaptiveStrategy;
  readonly min: number;
  readonly initial: number;
  readonly partitions: Partial<Record<RateLimitCriticality, number>> | undefined;
  /** Where it was declared, for messages. */
  readonly where: string;
}

/**
 * Validates an adaptive policy; throws a {@link RateLimitConfigError} naming the field, the value and what is
 * allowed. `min` defaults to concurrency-limits' floor of the strategy, `initial` to 20, each within `limit`.
 */
export function compileAdaptivePolicy(policy: RateLimitAdaptivePolicy, where: string): CompiledAdaptivePolicy {
  const fail = (message: string) => new RateLimitConfigError(`${where}: ${message}`);
  if ('reserve' in policy) {
    throw fail(
      `reserve does not apply to an adaptive policy, whose limit moves with latency; share it between criticalities with adaptive.partitions, such as { partitions: { critical: 0.2, default: 0.8 } }.`,
    );
  }
  for (const field of Object.keys(policy)) {
    if (!KNOWN_FIELDS.includes(field)) {
      throw fail(
        `'${field}' does not apply to an adaptive policy (a per-instance limit on requests in flight, for every client); its fields are ${KNOWN_FIELDS.join(', ')}.`,
      );
    }
  }
  const { limit, name = 'adaptive', adaptive = {} } = policy;
  if (!isWhole(limit, 1)) throw fail(`limit: ${describeValue(limit)} must be a whole number ≥ 1 (the most requests in flight).`);
  if (typeof name !== 'string' || !NAME_PATTERN.test(name))
    throw fail(`name: ${describeValue(name)} must be 1-64 characters of A-Z a-z 0-9 _ . -`);
  if (typeof adaptive !== 'object' || adaptive === null)
    throw fail(`adaptive: ${describeValue(adaptive)} must be an object such as { strategy: 'vegas' }.`);
  for (const field of Object.keys(adaptive)) {
    if (!KNOWN_ADAPTIVE_FIELDS.includes(field))
      throw fail(`unknown field 'adaptive.${field}'; known fields are ${KNOWN_ADAPTIVE_FIELDS.join(', ')}.`);
  }
  const { strategy = 'vegas', min = Math.min(JAVA_MIN[strategy] ?? 1, limit) } = adaptive;
  if (!STRATEGIES.includes(strategy)) {
    throw fail(`adaptive.strategy: ${describeValue(strategy)} must be one of ${STRATEGIES.map((s) => `'${s}'`).join(', ')}.`);
  }
  if (!isWhole(min, 1) || min > limit) throw fail(`adaptive.min: ${describeValue(min)} must be a whole number from 1 to limit (${limit}).`);
  const { initial = Math.min(Math.max(JAVA_INITIAL, min), limit) } = adaptive;
  if (!isWhole(initial, min) || initial > limit) {
    throw fail(`adaptive.initial: ${describeValue(initial)} must be a whole number from adaptive.min (${min}) to limit (${limit}).`);
  }
  return { name, limit, strategy, min, initial, partitions: checkedPartitions(adaptive.partitions, fail), where };
}

function checkedPartitions(
  partitions: unknown,
  fail: (message: string) => Error,
): Partial<Record<RateLimitCriticality, number>> | undefined {
  if (partitions === undefined) return undefined;
  const example = `for example { critical: 0.5, default: 0.4, sheddable: 0.1 }`;
  if (typeof partitions !== 'object' || partitions === null)
    throw fail(`adaptive.partitions: ${describeValue(partitions)} must be an object, ${example}.`);
  let sum = 0;
  for (const [key, share] of Object.entries(partitions)) {
    if (!(RATE_LIMIT_CRITICALITIES as readonly string[]).includes(key)) {
      throw fail(`adaptive.partitions: '${key}' is not a criticality; use 'critical', 'default' or 'sheddable'.`);
    }
    if (typeof share !== 'number' || !(share >= 0 && share <= 1))
      throw fail(`adaptive.partitions.${key}: ${describeValue(share)} must be a share in [0, 1].`);
    sum += share;
  }
  if (sum > 1 + 1e-9) throw fail(`adaptive.partitions: the shares add up to ${sum}, more than 1; ${example}.`);
  return partitions as Partial<Record<RateLimitCriticality, number>>;
}

function isWhole(value: unknown, least: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= least;
}

/** The strategy a compiled policy follows, at its initial limit. */
export function newStrategy({ strategy, min, initial, limit }: CompiledAdaptivePolicy): AdaptiveStrategy {
  if (strategy === 'gradient') return new GradientStrategy({ initial, min, max: limit });
  if (strategy === 'aimd') return new AimdStrategy({ initial, min, max: limit });
  return new VegasStrategy({ initial, min, max: limit });
}

/** A limiter for `compiled` on the monotonic clock (`performance.now`) unless another is given. */
export function newAdaptiveLimiter(
  compiled: CompiledAdaptivePolicy,
  now: () => number = () => performance.now(),
  window?: AdaptiveWindowOptions,
): AdaptiveLimiter {
  return new AdaptiveLimiter({ strategy: newStrategy(compiled), now, floor: compiled.min, partitions: compiled.partitions, window });
}
