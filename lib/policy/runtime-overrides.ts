import type { AlgorithmParams } from '../algorithms/algorithm.interface';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitOverride } from '../interfaces/override.interface';
import type { Duration } from '../interfaces/policy.interface';
import { describeValue } from '../shared/describe-value';
import { MAX_SCALED, NAME_PATTERN, type CompiledPolicy } from './compile-policy';
import { parseDuration } from './duration';

/** Most runtime overrides kept (in the store and on each instance): at most ~1 KB each, so ~100 MB at worst. */
export const MAX_OVERRIDES = 100_000;
/** Longest tracker pattern, in UTF-16 code units, bounded as every tracker is. */
export const MAX_TRACKER_PATTERN_LENGTH = 256;
/** Longest `window` string (`'90s'`, `'1.5h'`…); anything longer is no duration anyone writes. */
const MAX_WINDOW_TEXT = 32;
const FIELDS = new Set(['limit', 'window', 'burst']);
/** Half of a surrogate pair on its own: a client sends it to Redis as U+FFFD, so it would never match again. */
const LONE_SURROGATE = /\p{Surrogate}/u;

/** An override's numbers, validated: what replaces the policy's. */
export interface OverrideNumbers {
  readonly limit: number | undefined;
  readonly windowMs: number | undefined;
  readonly burst: number | undefined;
}

/** One override as an instance applies it. */
export interface OverrideEntry extends OverrideNumbers {
  readonly policy: string;
  /** As matched: a tracker (`by:acme`, `ip:203.0.113.7`), a prefix ending in `*` (`by:gold-*`), or `*`. */
  readonly pattern: string;
  /** As set (`acme`, `gold-*`): what listOverrides and events report. */
  readonly tracker: string;
  readonly override: RateLimitOverride;
  /** When it ends, store ms; `undefined`: never. */
  readonly until: number | undefined;
  /** When it ends on this instance's clock, ms; `Infinity`: never. */
  endsAt: number;
  /** The stored value, to tell a changed override from the same one when the set is read again. */
  readonly json: string;
  /** What the pipeline built for it once, by what it was built from (overridden requests of fixed policies). */
  built: WeakMap<object, unknown> | undefined;
}

/** The store's field of an override: `<policy>\n<pattern>` (a policy name holds no newline). */
export function overrideField(policy: string, pattern: string): string {
  return `${policy}\n${pattern}`;
}

/** The value stored for an override: its JSON, with the tracker as set and `until` in store ms. */
export function overrideJson(tracker: string, override: RateLimitOverride, until: number | undefined): string {
  return JSON.stringify(until === undefined ? { tracker, override } : { tracker, override, until });
}

/**
 * The entry of a stored field and value, or `undefined` when they are not an override this version can apply
 * (written by hand, or by a later version): skipped, never thrown on the request path.
 */
export function parseStoredOverride(field: string, json: string, storeNowMs: number, localNowMs: number): OverrideEntry | undefined {
  const newline = field.indexOf('\n');
  if (newline <= 0) return undefined;
  try {
    const { tracker, override, until } = JSON.parse(json) as { tracker?: unknown; override?: unknown; until?: unknown };
    if (typeof tracker !== 'string' || (until !== undefined && typeof until !== 'number')) return undefined;
    const numbers = overrideNumbers(override, 'stored override');
    return {
      policy: field.slice(0, newline),
      pattern: field.slice(newline + 1),
      tracker,
      override: override as RateLimitOverride,
      ...numbers,
      until,
      endsAt: until === undefined ? Infinity : localNowMs + (until - storeNowMs),
      json,
      built: undefined,
    };
  } catch {
    return undefined;
  }
}

/**
 * `override`'s numbers, checked as a policy's are: `limit` and `burst` whole numbers ≥ 1, `window` a
 * {@link Duration}; at least one of them, nothing else. `where` prefixes the messages.
 */
export function overrideNumbers(override: unknown, where: string): OverrideNumbers {
  const fail = (message: string) => new RateLimitConfigError(`${where}: ${message}`);
  if (override === null || typeof override !== 'object' || Array.isArray(override)) {
    throw fail(`override: ${describeValue(override)} must be an object such as { limit: 5 }, with limit, window and/or burst.`);
  }
  const fields = Object.keys(override);
  for (const field of fields) {
    if (!FIELDS.has(field)) throw fail(`override: unknown field '${field}'; an override sets limit, window and/or burst.`);
  }
  const { limit, window, burst } = override as RateLimitOverride;
  if (limit === undefined && window === undefined && burst === undefined) {
    throw fail(
      `override: ${describeValue(override)} sets nothing; give limit, window and/or burst (to go back to the policy as written, call removeOverride).`,
    );
  }
  return {
    limit: limit === undefined ? undefined : wholeNumber(limit, `${where}: limit`),
    windowMs: window === undefined ? undefined : windowOf(window, `${where}: window`),
    burst: burst === undefined ? undefined : wholeNumber(burst, `${where}: burst`),
  };
}

/**
 * Throws a {@link RateLimitConfigError} when `numbers` cannot apply to one of `policies` (every policy named
 * `name` the app knows): a `burst` on an algorithm without one, a `window` on a calendar window, numbers
 * past the exact integer range, or a capacity below the policy's fixed `cost` (every request would be
 * rejected). A limit or window the policy computes with a function is replaced: the function is not called
 * for the trackers the override matches.
 */
export function assertOverrideFits(numbers: OverrideNumbers, name: string, policies: readonly CompiledPolicy[], where: string): void {
  const fail = (message: string) => new RateLimitConfigError(`${where}: ${message}`);
  for (const { policy, algorithm, calendars, staticCost } of policies) {
    if (numbers.burst !== undefined && !algorithm.usesBurst) {
      throw fail(
        `burst: ${numbers.burst}: policy '${name}' uses '${algorithm.name}', which has no burst (only token-bucket, gcra and leaky-bucket do); set limit instead.`,
      );
    }
    if (numbers.windowMs !== undefined && calendars !== undefined) {
      throw fail(
        `window: policy '${name}' counts in calendar periods (${describeValue(policy.window)}), which a window cannot replace; set limit only.`,
      );
    }
    const limit = numbers.limit ?? (typeof policy.limit === 'number' ? policy.limit : undefined);
    const burst = numbers.burst ?? policy.burst ?? limit;
    const windowMs = numbers.windowMs ?? staticWindowMs(policy.window);
    if (limit !== undefined && burst !== undefined && windowMs !== undefined && Math.max(limit, burst) * windowMs > MAX_SCALED) {
      throw fail(
        `limit × window is too large for policy '${name}' (${Math.max(limit, burst)} × ${windowMs} ms); keep it at most 2^50, for example with a shorter window and a proportionally smaller limit.`,
      );
    }
    const capacity = algorithm.usesBurst ? burst : limit;
    if (staticCost !== undefined && capacity !== undefined && staticCost > capacity) {
      const field = algorithm.usesBurst && (numbers.burst !== undefined || policy.burst !== undefined) ? 'burst' : 'limit';
      throw fail(
        `${field}: ${capacity} is less than the cost of policy '${name}' (${algorithm.name}, cost ${staticCost}), so every request would be rejected; set ${field} to at least ${staticCost}.`,
      );
    }
  }
}

/** A policy name to override: 1-64 characters of A-Z a-z 0-9 _ . - (what a policy's `name` may be). */
export function assertPolicyName(policy: unknown, where: string): asserts policy is string {
  if (typeof policy !== 'string' || !NAME_PATTERN.test(policy)) {
    throw new RateLimitConfigError(
      `${where}: policy: ${describeValue(policy)} must be a policy's name (1-64 characters of A-Z a-z 0-9 _ . -).`,
    );
  }
}

/** A tracker pattern: a non-empty string of at most 256 characters without a lone surrogate. */
export function assertTrackerPattern(tracker: unknown, where: string): asserts tracker is string {
  const fail = (message: string) => new RateLimitConfigError(`${where}: tracker: ${message}`);
  if (typeof tracker !== 'string' || tracker.length === 0) {
    throw fail(
      `${describeValue(tracker)} must be a non-empty string: a tracker ('acme', 'ip:203.0.113.7', 'user:42'), a prefix ending in '*' ('gold-*'), or '*'.`,
    );
  }
  if (tracker.length > MAX_TRACKER_PATTERN_LENGTH) {
    throw fail(
      `${tracker.length} characters; at most ${MAX_TRACKER_PATTERN_LENGTH} are kept (a longer value is better matched by a prefix ending in '*').`,
    );
  }
  if (LONE_SURROGATE.test(tracker))
    throw fail(`${JSON.stringify(tracker)} has half of a UTF-16 surrogate pair alone, which Redis cannot store.`);
}

/**
 * `params` with `entry`'s numbers in place of the policy's, computed as compilePolicy computes them: `burst`
 * is the override's, else the policy's, else the (overridden) limit. A `window` never replaces a calendar
 * window's periods, and numbers past the exact integer range leave the policy as written: an override set by
 * another instance that knows the policy otherwise must never fail a request. `params` itself when nothing changes.
 */
export function overriddenParams(compiled: CompiledPolicy, params: AlgorithmParams, entry: OverrideNumbers): AlgorithmParams {
  const limit = entry.limit ?? params.limit;
  const burst = entry.burst ?? (entry.limit === undefined ? params.burst : (compiled.policy.burst ?? limit));
  const { periods } = params;
  const windowMs = entry.windowMs === undefined || periods !== undefined ? params.windowMs : entry.windowMs;
  if (limit === params.limit && burst === params.burst && windowMs === params.windowMs) return params;
  if (Math.max(limit, burst) * windowMs > MAX_SCALED) return params;
  return periods === undefined ? { limit, windowMs, burst } : { limit, windowMs, burst, periods };
}

function wholeNumber(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new RateLimitConfigError(`${field}: ${describeValue(value)} must be a whole number ≥ 1.`);
  }
  return value;
}

function windowOf(window: unknown, field: string): number {
  if (window !== null && typeof window === 'object') {
    throw new RateLimitConfigError(
      `${field}: ${describeValue(window)}: an override's window is a duration ('1m', 60000); calendar windows are set by the policy.`,
    );
  }
  if (typeof window === 'string' && window.length > MAX_WINDOW_TEXT) {
    throw new RateLimitConfigError(`${field}: a string of ${window.length} characters is not a duration; write one such as '1m' or '90s'.`);
  }
  const ms = parseDuration(window as Duration, field);
  if (ms > MAX_SCALED) throw new RateLimitConfigError(`${field}: ${describeValue(window)} is more than 2^50 ms; use a shorter window.`);
  return ms;
}

/** A policy's window in ms when it is fixed and not a calendar window; `undefined` otherwise. */
function staticWindowMs(window: unknown): number | undefined {
  if (typeof window !== 'number' && typeof window !== 'string') return undefined;
  try {
    return parseDuration(window as Duration, 'window');
  } catch {
    return undefined;
  }
}
