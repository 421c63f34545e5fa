/**
 * Bootstrap validation of the exemption options (`skipIf`, `ignoreUserAgents`, `errorMessage`, a policy's
 * `skipIf`, `@SkipRateLimit(names)`): each failure names the field, the value and what is allowed.
 */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { SkipRateLimit } from '../../lib/rate-limit.decorator';
import { buildRoutePlan, planWithout } from '../../lib/routes/route-plan';
import { validateModuleOptions } from '../../lib/policy/validate-options';

const registry = new RateLimitAlgorithmRegistry();
const A: RateLimitPolicy = { name: 'a', algorithm: 'fixed-window', limit: 1, window: '1s' };
const B: RateLimitPolicy = { name: 'b', algorithm: 'gcra', limit: 1, window: '1s' };

describe('module options', () => {
  it.each<[Partial<Record<keyof RateLimitModuleOptions, unknown>>, string]>([
    [{ skipIf: true }, 'skipIf: true must be a function (context) => boolean | Promise<boolean>.'],
    [{ ignoreUserAgents: /bot/ }, 'ignoreUserAgents: /bot/ must be in an array: [/bot/].'],
    [{ ignoreUserAgents: ['bot'] }, `ignoreUserAgents: ["bot"] must be an array of regular expressions, for example [/googlebot/i].`],
    [{ errorMessage: 42 }, 'errorMessage: 42 must be a string or a function (context, decisions) => string.'],
  ])('%p fails', (options, message) => {
    expect(() => validateModuleOptions(options as RateLimitModuleOptions)).toThrow(
      new RateLimitConfigError(`RateLimitModule options: ${message}`),
    );
  });

  it('accepts functions, arrays of RegExp and strings', () => {
    expect(() => validateModuleOptions({ skipIf: () => false, ignoreUserAgents: [/bot/i], errorMessage: () => 'slow down' })).not.toThrow();
    expect(() => validateModuleOptions({ ignoreUserAgents: [], errorMessage: 'slow down' })).not.toThrow();
  });
});

describe('route plans', () => {
  const plan = (policies: RateLimitPolicy[], skip?: { onHandler: string[]; onClass: string[] }) =>
    buildRoutePlan({ policies, where: '@RateLimit on C.h', route: 'C.h', scopeKey: 'r=C.h', skip }, registry);

  it("a policy's skipIf must be a function", () => {
    expect(() => plan([{ ...A, skipIf: 'yes' as never }])).toThrow(
      '@RateLimit on C.h: skipIf: "yes" must be a function (context) => boolean | Promise<boolean>.',
    );
  });

  it('a name skipped on the handler must be a policy of the route; one skipped on the class need not', () => {
    expect(() => plan([A, B], { onHandler: ['c'], onClass: [] })).toThrow(
      "@SkipRateLimit on C.h: 'c' names no policy of the route (its policies: 'a', 'b').",
    );
    expect(plan([A, B], { onHandler: [], onClass: ['c'] }).policies.map((p) => p.compiled.name)).toEqual(['a', 'b']);
    expect(plan([A, B], { onHandler: ['a'], onClass: ['b'] }).policies).toEqual([]);
  });

  it('only a route with a policy skipIf has variants, built once per combination', () => {
    expect(plan([A, B]).skippable).toBeUndefined();
    const p = plan([A, { ...B, skipIf: () => true }]);
    expect(p.skippable).toEqual([1]);
    const without = planWithout(p, 0b10)!;
    expect(without.policies.map((x) => x.compiled.name)).toEqual(['a']);
    expect(without.policies[0]).toBe(p.policies[0]);
    expect(planWithout(p, 0b10)).toBe(without);
    expect(planWithout(p, 0)).toBe(p);
    expect(planWithout(p, 0b11)).toBeNull();
  });

  it('@SkipRateLimit takes non-empty names', () => {
    expect(() => SkipRateLimit('')).toThrow('@SkipRateLimit(): policy names must be non-empty strings, got "".');
  });
});
