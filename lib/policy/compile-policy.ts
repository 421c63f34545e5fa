import type { AlgorithmParams, RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import type { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { CalendarWindow, Duration, RateLimitPolicy } from '../interfaces/policy.interface';
import { CALENDAR_EXAMPLE, calendarNeedsFixedWindow, calendarWindowsFor, isCalendarWindow, type CalendarWindows } from './calendar';
import type { LockoutEscalation } from './compile-escalation';
import { compileEscalation } from './compile-escalation';
import { compileReserve, type CompiledReserve } from './compile-reserve';
import { parseDuration } from './duration';
import { describeValue } from '../shared/describe-value';

/** A policy validated once, with everything that does not depend on the request already computed. */
export interface CompiledPolicy {
  readonly policy: RateLimitPolicy;
  readonly algorithm: RateLimitAlgorithm;
  readonly name: string;
  /** Key parts after the tracker: `<scope>:<name>:` then the algorithm's tag (state) or `b` (lockout). */
  readonly stateKeySuffix: string;
  readonly blockKeySuffix: string;
  readonly blockForMs: number;
  /** `escalate` in ms; undefined when every lockout lasts `blockForMs`. */
  readonly escalate: LockoutEscalation | undefined;
  readonly shadow: boolean;
  /**
   * Params when neither limit nor window is a function; otherwise computed per request. For a calendar
   * window, worked out at each read for this host's now (from {@link calendars}' cache): the period moves on.
   */
  readonly staticParams: AlgorithmParams | undefined;
  /** A `fixed-window`'s calendar windows when its window is one, or a function that may return one. */
  readonly calendars: CalendarWindows | undefined;
  /** Cost when it is not a function. */
  readonly staticCost: number | undefined;
  /** The policy's `reserve`, compiled; undefined without one. */
  readonly reserve: CompiledReserve | undefined;
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
  'escalate',
  'settle',
  'quotaUnit',
  'slice',
  'reserve',
]);
/** A policy name or scope: 1-64 characters of A-Z a-z 0-9 _ . - */
export const NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
/** Largest limit × window (ms) the integer arithmetic stays exact for, in Lua and in JavaScript. */
export const MAX_SCALED = 2 ** 50;

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
  const escalate = compileEscalation(policy.escalate, blockForMs, at);
  if (policy.burst !== undefined) positiveInteger(policy.burst, at('burst'));
  if (typeof policy.limit !== 'function') positiveInteger(policy.limit, at('limit'));
  const calendars = calendarWindowsFor(policy.window, algorithm.name, at('window'));
  if (typeof policy.window !== 'function' && !isCalendarWindow(policy.window)) parseWindow(policy.window, algorithm, at('window'));
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
  assertSettle(policy, algorithm, where);
  assertQuotaUnit(policy, algorithm, where);
  assertSlice(policy, algorithm, where);
  const reserve = compileReserve(policy, algorithm, where);

  const keySuffix = `${policy.scope === undefined ? scopeKey : `s=${policy.scope}`}:${name}:`;
  const compiled: CompiledPolicy = {
    policy,
    algorithm,
    name,
    stateKeySuffix: keySuffix + algorithm.keyTag,
    blockKeySuffix: `${keySuffix}b`,
    blockForMs,
    escalate,
    shadow: policy.mode === 'shadow',
    staticParams: undefined,
    calendars,
    staticCost: typeof policy.cost === 'function' ? undefined : (policy.cost ?? 1),
    reserve,
  };
  const { limit, window } = policy;
  if (typeof limit !== 'function' && typeof window !== 'function') {
    const staticParams = resolveParams(compiled, limit, window, where);
    if (!isCalendarWindow(window)) return { ...compiled, staticParams };
    return Object.defineProperty({ ...compiled }, 'staticParams', {
      enumerable: true,
      get: () => resolveParams(compiled, limit, window, where),
    });
  }
  return compiled;
}

/**
 * Validates a (possibly per-request) limit and window and returns the algorithm's params. A calendar
 * window's periods are computed around `nowMs` (the store's clock when it is in-process, else this host's).
 */
export function resolveParams(
  compiled: CompiledPolicy,
  limit: number,
  window: Duration | CalendarWindow,
  where: string,
  nowMs?: number,
): AlgorithmParams {
  positiveInteger(limit, `${where}: limit`);
  if (isCalendarWindow(window)) {
    // No limit × window bound: fixed-window never multiplies them (its arithmetic is on instants only).
    const { calendars } = compiled;
    if (calendars === undefined) throw calendarNeedsFixedWindow(compiled.algorithm.name, `${where}: window`);
    return calendars.around(window, nowMs ?? Date.now(), `${where}: window`).params(limit, compiled.policy.burst ?? limit);
  }
  const windowMs = parseWindow(window, compiled.algorithm, `${where}: window`);
  const burst = compiled.policy.burst ?? limit;
  const scaled = Math.max(limit, burst) * windowMs;
  if (scaled > MAX_SCALED) {
    throw new RateLimitConfigError(
      `${where}: limit × window is too large (${limit} × ${windowMs} ms); keep it at most 2^50, for example by using a shorter window with a proportionally smaller limit.`,
    );
  }
  return { limit, windowMs, burst };
}

/** A window that is not a calendar window, in ms; `fixed-window`'s error also offers a calendar window. */
function parseWindow(window: Duration, algorithm: RateLimitAlgorithm, field: string): number {
  return parseDuration(window, field, algorithm.name === 'fixed-window' ? CALENDAR_EXAMPLE : undefined);
}

/**
 * Throws a {@link RateLimitConfigError} when `compiled`'s fixed `cost` is more than its algorithm can ever admit,
 * its capacity: `burst` for `token-bucket`, `gcra` and `leaky-bucket` (which defaults to `limit`), `limit` for
 * the others (`concurrency`: units leased at once). Such a policy would reject every request forever, so a route
 * that has one fails at bootstrap. Only what is known then is checked: a `cost` function, or a `limit` function
 * without a fixed `burst`, is left to each request (which is rejected, with a message saying retrying will not
 * help). Not called for programmatic calls: a cost above capacity there is one rejected call, as any that does not fit.
 */
export function assertCostFits({ policy, algorithm, name, staticCost }: CompiledPolicy, where: string): void {
  const field = algorithm.usesBurst && policy.burst !== undefined ? 'burst' : 'limit';
  const capacity = policy[field];
  if (staticCost === undefined || typeof capacity !== 'number' || staticCost <= capacity) return;
  const raise = field === 'limit' && algorithm.usesBurst ? `raise limit (or set burst, which defaults to limit)` : `raise ${field}`;
  throw new RateLimitConfigError(
    `${where}: cost: ${staticCost} is more than policy '${name}' (${algorithm.name}) can ever admit, its ${field} of ${capacity}, ` +
      `so every request would be rejected; lower cost to at most ${capacity}, or ${raise} to at least ${staticCost}.`,
  );
}

/** Validates a cost: a whole number ≥ 0. */
export function cost(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new RateLimitConfigError(`${field}: ${describeValue(value)} must be a whole number of units ≥ 0.`);
  }
  return value;
}

/** `settle` is a function, on a counting policy that gives nothing back by itself. */
function assertSettle(policy: RateLimitPolicy, algorithm: RateLimitAlgorithm, where: string): void {
  if (policy.settle === undefined) return;
  const fail = (message: string) => new RateLimitConfigError(`${where}: ${message}`);
  if (typeof policy.settle !== 'function')
    throw fail(`settle: ${describeValue(policy.settle)} must be a function (context, result) => number | Promise<number>.`);
  if (algorithm.name === 'concurrency')
    throw fail(`settle cannot be combined with 'concurrency': a lease has no cost to settle, it is given back whole when the work ends.`);
  if (policy.countOnly !== undefined)
    throw fail(
      `settle cannot be combined with countOnly: ${describeValue(policy.countOnly)}; settle returns 0 for an outcome that should not count.`,
    );
}

/** `quotaUnit` is one of the draft's units, and `concurrent-requests` is exactly the unit of `concurrency`. */
function assertQuotaUnit(policy: RateLimitPolicy, algorithm: RateLimitAlgorithm, where: string): void {
  const unit = policy.quotaUnit;
  if (unit === undefined) return;
  oneOf(unit, ['requests', 'content-bytes', 'concurrent-requests'], `${where}: quotaUnit`);
  const leases = algorithm.name === 'concurrency';
  if (leases !== (unit === 'concurrent-requests')) {
    throw new RateLimitConfigError(
      `${where}: ` +
        (leases
          ? `quotaUnit: '${unit}' cannot be the unit of a 'concurrency' policy, which counts requests in flight ('concurrent-requests').`
          : `quotaUnit: 'concurrent-requests' is the unit of 'concurrency' policies; '${algorithm.name}' counts a rate ('requests' or 'content-bytes').`),
    );
  }
}

/** The algorithms whose units can be taken ahead and spent later: one count or one bucket, no per-request state. */
const SLICEABLE = ['fixed-window', 'sliding-window', 'token-bucket', 'gcra'];
/** Why the others cannot be. */
const UNSLICEABLE: Record<string, string> = {
  concurrency: 'a lease is per request',
  'leaky-bucket': 'each request gets its own delay',
  'sliding-log': 'each request is logged at its own time',
};
/** Fields a slice cannot go with, and why: a slice is spent in-process without asking the store. */
const NOT_WITH_SLICE = {
  countOnly: 'its units cannot be given back one request at a time',
  settle: 'its units cannot be given back one request at a time',
  blockFor: 'a lockout set by another instance would go unseen',
  reserve: 'the share kept for more critical requests would be spent too',
} as const;

/** `slice` is a whole number that fits in the policy's capacity, on a policy whose units are only ever taken. */
function assertSlice(policy: RateLimitPolicy, algorithm: RateLimitAlgorithm, where: string): void {
  const slice = policy.slice;
  if (slice === undefined) return;
  const fail = (message: string) => new RateLimitConfigError(`${where}: slice: ${message}`);
  positiveInteger(slice, `${where}: slice`);
  if (!SLICEABLE.includes(algorithm.name)) {
    const why = UNSLICEABLE[algorithm.name] ?? 'not one of the built-in counters';
    throw fail(`'${algorithm.name}' cannot be sliced (${why}); slices work with ${SLICEABLE.map((a) => `'${a}'`).join(', ')}.`);
  }
  for (const [field, why] of Object.entries(NOT_WITH_SLICE)) {
    if (policy[field as keyof typeof NOT_WITH_SLICE] !== undefined)
      throw fail(`cannot be combined with ${field}: a slice is spent in-process without asking the store, so ${why}.`);
  }
  // A window's capacity is its limit; a bucket's, its burst.
  const capacity =
    typeof policy.limit !== 'number' ? undefined : algorithm.name.endsWith('window') ? policy.limit : (policy.burst ?? policy.limit);
  if (capacity !== undefined && slice > capacity)
    throw fail(
      `${slice} is more than the policy's capacity (${capacity}), so no slice would ever fit; take a small share of it (limit / 100 / instances keeps the overshoot within 1 %).`,
    );
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
