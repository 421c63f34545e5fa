import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitEscalation } from '../interfaces/policy.interface';
import { describeValue } from '../shared/describe-value';
import { parseDuration } from './duration';

/**
 * Longest lockout, escalation cap, forgiveness period or deny, ms (100 years). Every key keeps a TTL, and
 * server times plus these stay below 10^14, which Lua still prints as whole numbers.
 */
export const MAX_LOCKOUT_MS = 3_155_760_000_000;

/** A policy's `escalate`, in ms (see {@link RateLimitEscalation}). */
export interface LockoutEscalation {
  /** Each lockout lasts this many times the one before. */
  readonly factor: number;
  /** Longest lockout. */
  readonly maxMs: number;
  /** Quiet time after a lockout's end after which the offence count starts over. */
  readonly forgiveAfterMs: number;
}

const FIELDS = new Set(['factor', 'max', 'forgiveAfter']);
/** Largest factor: lockouts stay exact integers (the cap times the factor stays below 2^53). */
const MAX_FACTOR = 1_000;

/**
 * Validates a policy's `escalate` against its `blockFor` (ms, 0 when absent) and returns it in ms;
 * `undefined` without one. `at` names a field in error messages (`<where>: <field>`).
 */
export function compileEscalation(
  escalate: RateLimitEscalation | undefined,
  blockForMs: number,
  at: (field: string) => string,
): LockoutEscalation | undefined {
  if (escalate === undefined) return undefined;
  const fail = (field: string, message: string) => new RateLimitConfigError(`${at(field)}: ${message}`);
  if (escalate === null || typeof escalate !== 'object' || Array.isArray(escalate)) {
    throw fail('escalate', `${describeValue(escalate)} must be an object such as { max: '1h', forgiveAfter: '1d' }.`);
  }
  for (const field of Object.keys(escalate)) {
    if (!FIELDS.has(field)) throw fail('escalate', `unknown field '${field}'; known fields are factor, max, forgiveAfter.`);
  }
  if (blockForMs === 0) {
    throw fail('escalate', `needs blockFor, the first lockout's length (for example blockFor: '1m'); later lockouts grow from it.`);
  }
  const { factor = 2, max, forgiveAfter } = escalate;
  if (typeof factor !== 'number' || !Number.isInteger(factor) || factor < 2 || factor > MAX_FACTOR) {
    throw fail('escalate.factor', `${describeValue(factor)} must be a whole number from 2 to ${MAX_FACTOR}.`);
  }
  if (max === undefined) throw fail('escalate.max', `is required: the longest lockout, for example '1h'.`);
  if (forgiveAfter === undefined) {
    throw fail('escalate.forgiveAfter', `is required: how long after a lockout ends its offences are forgotten, for example '1d'.`);
  }
  const maxMs = bounded(parseDuration(max, at('escalate.max')), 'escalate.max', fail);
  if (maxMs < blockForMs) throw fail('escalate.max', `${maxMs} ms must be at least blockFor (${blockForMs} ms).`);
  const forgiveAfterMs = bounded(parseDuration(forgiveAfter, at('escalate.forgiveAfter')), 'escalate.forgiveAfter', fail);
  return { factor, maxMs, forgiveAfterMs };
}

function bounded(ms: number, field: string, fail: (field: string, message: string) => Error): number {
  if (ms > MAX_LOCKOUT_MS) throw fail(field, `${ms} ms is longer than 100 years (${MAX_LOCKOUT_MS} ms), the longest supported.`);
  return ms;
}
