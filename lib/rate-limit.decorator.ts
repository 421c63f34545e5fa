import { SetMetadata } from '@nestjs/common';
import type {
  CalendarWindow,
  ContextValue,
  Duration,
  RateLimitAlgorithmName,
  RateLimitPolicy,
  RateLimitPolicyOverride,
} from './interfaces/policy.interface';
import type { RateLimitAdaptivePolicy, RateLimitCriticality } from './interfaces/overload.interface';

/**
 * What `@RateLimit` stores on a class or a handler: the policies as written (complete ones, and overrides of
 * inherited ones), validated at bootstrap.
 */
export interface RateLimitMetadata {
  policies: Array<RateLimitPolicy | RateLimitPolicyOverride | RateLimitAdaptivePolicy>;
}

/**
 * A metadata decorator with its key as `KEY`: the shape of Nest's `Reflector.createDecorator` (Nest 10.2+),
 * built on `SetMetadata` so that every supported Nest line has it. `Reflector#get(decorator, target)` reads
 * it on Nest 10.2+, `Reflector#get(decorator.KEY, target)` on any line.
 */
export interface RateLimitMetadataDecorator<T> {
  (value: T): ClassDecorator & MethodDecorator;
  readonly KEY: string;
}

function metadataDecorator<T>(key: string): RateLimitMetadataDecorator<T> {
  return Object.assign((value: T) => SetMetadata(key, value), { KEY: key });
}

/**
 * Low-level metadata decorator behind {@link RateLimit}; read it with `Reflector#get(RateLimitPolicies.KEY, target)`.
 * Prefer `@RateLimit`, which also accepts the positional shorthand.
 */
export const RateLimitPolicies = metadataDecorator<RateLimitMetadata>('nestjs-redis-ratelimit:policies');

/**
 * Low-level metadata decorator behind {@link SkipRateLimit}: `true` skips every policy, an array of names
 * only those policies.
 */
export const RateLimitSkip = metadataDecorator<true | readonly string[]>('nestjs-redis-ratelimit:skip');

/**
 * Limits a controller (every handler) or one handler. Complete policies (with `algorithm`, `limit` and
 * `window`) replace what the route inherits: handler metadata overrides class metadata, which overrides the
 * module's `defaultPolicy`. A policy without all three is an override ({@link RateLimitPolicyOverride}): it
 * changes the fields it sets of the inherited policy of its `name` (the class's `@RateLimit`, else the
 * module's `defaultPolicy`), and the other inherited policies keep applying; complete policies given along
 * with an override replace the inherited policy of their name, or are added. Several policies are decided
 * together: all pass or none is charged. Policies are validated when the application starts; a bad one, or
 * an override naming no inherited policy, fails `app.init()`.
 * @example @RateLimit({ algorithm: 'sliding-window', limit: 100, window: '1m' })
 * @example @RateLimit([{ name: 'burst', algorithm: 'token-bucket', limit: 10, window: '1s' }, { name: 'daily', algorithm: 'fixed-window', limit: 10_000, window: '1d' }])
 * @example @RateLimit({ name: 'burst', limit: 20 }) // the inherited 'burst' with limit 20; 'daily' still applies
 * @example @RateLimit({ algorithm: 'adaptive', limit: 200 }) // at most 200 in flight, fewer as latency grows (503 beyond)
 */
export function RateLimit(
  policy:
    | RateLimitPolicy
    | RateLimitPolicyOverride
    | RateLimitAdaptivePolicy
    | ReadonlyArray<RateLimitPolicy | RateLimitPolicyOverride | RateLimitAdaptivePolicy>,
): ClassDecorator & MethodDecorator;
/**
 * Positional shorthand: `@RateLimit('sliding-window', 100, '1m')`, with any other policy field in `extra`.
 * It always writes a complete policy, so it replaces what the route inherits (it never overrides).
 * @example @RateLimit('gcra', 5, '1s', { name: 'writes', by: 'user' })
 */
export function RateLimit(
  algorithm: RateLimitAlgorithmName,
  limit: ContextValue<number>,
  window: ContextValue<Duration | CalendarWindow>,
  extra?: Partial<RateLimitPolicy>,
): ClassDecorator & MethodDecorator;
export function RateLimit(
  first:
    | RateLimitPolicy
    | RateLimitPolicyOverride
    | RateLimitAdaptivePolicy
    | ReadonlyArray<RateLimitPolicy | RateLimitPolicyOverride | RateLimitAdaptivePolicy>
    | RateLimitAlgorithmName,
  limit?: ContextValue<number>,
  window?: ContextValue<Duration | CalendarWindow>,
  extra?: Partial<RateLimitPolicy>,
): ClassDecorator & MethodDecorator {
  const policies =
    typeof first === 'string'
      ? [{ ...extra, algorithm: first, limit, window } as RateLimitPolicy]
      : ([] as RateLimitMetadata['policies']).concat(first);
  return RateLimitPolicies({ policies });
}

/**
 * Without arguments, exempts a handler, or every handler of a controller, from every policy (including
 * `defaultPolicy`); on a class, a handler's own `@RateLimit` still applies. With policy names, exempts it
 * from those policies only (names on the class and on the handler add up); the route's other policies
 * apply as usual. On a handler, each name must be one of the route's policies (checked at bootstrap).
 * @example @SkipRateLimit() @Get('health') health() {}
 * @example @SkipRateLimit('burst') @Post('import') import() {} // keeps 'daily'
 */
export function SkipRateLimit(...policies: string[]): ClassDecorator & MethodDecorator {
  for (const name of policies) {
    if (typeof name !== 'string' || name.length === 0) {
      throw new TypeError(`@SkipRateLimit(): policy names must be non-empty strings, got ${JSON.stringify(name)}.`);
    }
  }
  return RateLimitSkip(policies.length === 0 ? true : policies);
}

/**
 * Low-level metadata decorator behind {@link RateLimitPriority}; read it with
 * `Reflector#get(RateLimitPriorities.KEY, target)`.
 */
export const RateLimitPriorities = metadataDecorator<RateLimitCriticality>('nestjs-redis-ratelimit:priority');

/**
 * The criticality of a handler's calls, or of every handler of a controller (the handler's wins): which share
 * of a partitioned adaptive limit they draw on. Wins over the module's `priority` function.
 * @default 'default'
 * @example @RateLimitPriority('critical') @Post('checkout') checkout() {}
 */
export function RateLimitPriority(criticality: RateLimitCriticality): ClassDecorator & MethodDecorator {
  if (criticality !== 'critical' && criticality !== 'default' && criticality !== 'sheddable') {
    throw new TypeError(`@RateLimitPriority(): ${JSON.stringify(criticality)} must be 'critical', 'default' or 'sheddable'.`);
  }
  return RateLimitPriorities(criticality);
}
