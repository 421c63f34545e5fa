/**
 * `@RateLimit` overrides of inherited policies, resolved at bootstrap: the merge copies every field the
 * override sets (whatever fields policies grow), and each mistake fails `app.init()` naming the route, the
 * name and the policies there are. Also the `errorFormat` option's validation, and type tests of `@RateLimit`
 * (checked by `tsc`, which compiles this file).
 */
import { Controller, Get, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions, type RateLimitPolicy, type RateLimitPolicyOverride } from '../../lib';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import { resolvePolicies, type InheritedPolicies } from '../../lib/policy/policy-overrides';
import { validateModuleOptions } from '../../lib/policy/validate-options';

const BURST: RateLimitPolicy = { name: 'burst', algorithm: 'token-bucket', limit: 10, window: '1s', burst: 20, by: 'user', blockFor: '1m' };
const DAILY: RateLimitPolicy = { name: 'daily', algorithm: 'fixed-window', limit: 1000, window: '1d' };
const DEFAULTS: InheritedPolicies = {
  origin: 'RateLimitModule options: defaultPolicy',
  policies: [
    { policy: BURST, where: 'RateLimitModule options: defaultPolicy, policy 1 of 2' },
    { policy: DAILY, where: 'RateLimitModule options: defaultPolicy, policy 2 of 2' },
  ],
};

describe('resolvePolicies', () => {
  const resolve = (declared: Array<RateLimitPolicy | RateLimitPolicyOverride>) => resolvePolicies(declared, '@RateLimit on C.h', DEFAULTS);

  it('merges an override into the inherited policy of its name, keeping every other field and policy', () => {
    expect(resolve([{ name: 'burst', limit: 20, mode: 'shadow' }])).toEqual([
      {
        policy: { ...BURST, limit: 20, mode: 'shadow' },
        where: '@RateLimit on C.h over RateLimitModule options: defaultPolicy, policy 1 of 2',
      },
      DEFAULTS.policies[1],
    ]);
  });

  it('copies any field it is given, not a list of known ones, and a field set to undefined keeps the inherited value', () => {
    const override = { name: 'daily', fieldAddedLater: { unit: 'bytes' }, limit: undefined } as unknown as RateLimitPolicyOverride;
    expect(resolve([override])[1].policy).toEqual({ ...DAILY, fieldAddedLater: { unit: 'bytes' } });
  });

  it('with an override, a complete policy replaces the inherited one of its name in place, or is added', () => {
    const hourly: RateLimitPolicy = { name: 'hourly', algorithm: 'sliding-log', limit: 5, window: '1h' };
    const burst: RateLimitPolicy = { name: 'burst', algorithm: 'gcra', limit: 1, window: '1s' };
    expect(resolve([hourly, { name: 'daily', limit: 7 }, burst])).toEqual([
      { policy: burst, where: '@RateLimit on C.h, policy 3 of 3' },
      {
        policy: { ...DAILY, limit: 7 },
        where: '@RateLimit on C.h, policy 2 of 3 over RateLimitModule options: defaultPolicy, policy 2 of 2',
      },
      { policy: hourly, where: '@RateLimit on C.h, policy 1 of 3' },
    ]);
  });

  it('complete policies alone are the list as declared (what the route inherits does not matter)', () => {
    const hourly: RateLimitPolicy = { name: 'hourly', algorithm: 'sliding-log', limit: 5, window: '1h' };
    expect(resolve([hourly])).toEqual([{ policy: hourly, where: '@RateLimit on C.h' }]);
  });

  it('an override naming no inherited policy names the route, the name and the inherited names', () => {
    expect(() => resolve([{ name: 'bursty', limit: 20 }])).toThrow(
      new RateLimitConfigError(
        `@RateLimit on C.h: name: "bursty" sets no algorithm or window, so it overrides the inherited policy of that name, but the route inherits none of that name (RateLimitModule options: defaultPolicy has 'burst', 'daily'); name one of those, or set algorithm, limit and window for a policy of its own.`,
      ),
    );
  });

  it('an override where nothing is inherited says so; one without a name asks for it', () => {
    expect(() => resolvePolicies([{ name: 'burst', algorithm: 'gcra', limit: 20 }], '@RateLimit on C.h', undefined)).toThrow(
      `@RateLimit on C.h: name: "burst" sets no window, so it overrides the inherited policy of that name, but the route inherits no policy (RateLimitModule options have no defaultPolicy); set algorithm, limit and window for a policy of its own.`,
    );
    expect(() => resolve([DAILY, { limit: 20 } as RateLimitPolicyOverride])).toThrow(
      `@RateLimit on C.h, policy 2 of 2: a policy without algorithm or window overrides the inherited policy of its name, and this one has no name; add name: '<the policy to change>', or set algorithm and window for a policy of its own.`,
    );
  });

  it('two entries with one name fail, as two policies with one name do', () => {
    expect(() =>
      resolve([
        { name: 'burst', limit: 1 },
        { name: 'burst', window: '2s' },
      ]),
    ).toThrow("@RateLimit on C.h: name: two policies are named 'burst'; give each policy of a route its own name.");
  });
});

describe('bootstrap', () => {
  const init = async (controllers: Type<unknown>[], options: RateLimitModuleOptions = { defaultPolicy: [BURST, DAILY] }) => {
    const moduleRef = await Test.createTestingModule({ imports: [RateLimitModule.forRoot(options)], controllers }).compile();
    try {
      await moduleRef.init();
    } finally {
      await moduleRef.close();
    }
  };

  it("fails for an override on a handler naming none of the module's policies", async () => {
    @Controller()
    class OrdersController {
      @Get()
      @RateLimit({ name: 'hourly', limit: 5 })
      list() {
        return [];
      }
    }
    await expect(init([OrdersController])).rejects.toThrow(
      `@RateLimit on OrdersController.list: name: "hourly" sets no algorithm or window, so it overrides the inherited policy of that name, but the route inherits none of that name (RateLimitModule options: defaultPolicy has 'burst', 'daily'); name one of those, or set algorithm, limit and window for a policy of its own.`,
    );
  });

  it("fails for a class override, naming the class and the route it applies to; a handler's names the class's policies", async () => {
    @Controller()
    @RateLimit({ name: 'weekly', limit: 5 })
    class UsersController {
      @Get()
      me() {
        return 'me';
      }
    }
    await expect(init([UsersController])).rejects.toThrow(
      `@RateLimit on UsersController (applied to UsersController.me): name: "weekly" sets no algorithm or window, so it overrides`,
    );
    @Controller()
    @RateLimit({ name: 'own', algorithm: 'gcra', limit: 5, window: '1s' })
    class ReportsController {
      @Get()
      @RateLimit({ name: 'burst', limit: 5 })
      build() {
        return 'report';
      }
    }
    await expect(init([ReportsController])).rejects.toThrow(
      `but the route inherits none of that name (@RateLimit on ReportsController has 'own');`,
    );
  });

  it('fails for a merged policy that is invalid, naming the override and the policy it changes', async () => {
    @Controller()
    class PaymentsController {
      @Get()
      @RateLimit([
        { name: 'daily', limit: 5 },
        { name: 'burst', limit: 0 },
      ])
      pay() {
        return 'paid';
      }
    }
    await expect(init([PaymentsController])).rejects.toThrow(
      `@RateLimit on PaymentsController.pay, policy 2 of 2 over RateLimitModule options: defaultPolicy, policy 1 of 2: limit: 0 must be a whole number ≥ 1.`,
    );
  });

  it('fails for an override when the module has no defaultPolicy, and boots a valid one', async () => {
    @Controller()
    class SearchController {
      @Get()
      @RateLimit({ name: 'default', limit: 5 })
      find() {
        return [];
      }
    }
    await expect(init([SearchController], {})).rejects.toThrow(
      'the route inherits no policy (RateLimitModule options have no defaultPolicy)',
    );
    await expect(init([SearchController], { defaultPolicy: { algorithm: 'gcra', limit: 1, window: '1s' } })).resolves.toBeUndefined();
  });
});

describe('errorFormat', () => {
  it("is 'json' or 'problem+json'", () => {
    expect(() => validateModuleOptions({ errorFormat: 'problem' as never })).toThrow(
      new RateLimitConfigError(`RateLimitModule options: errorFormat: "problem" must be one of 'json', 'problem+json'.`),
    );
    expect(() => validateModuleOptions({ errorFormat: 'problem+json' })).not.toThrow();
    expect(() => validateModuleOptions({ errorFormat: 'json' })).not.toThrow();
  });
});

/** Type tests: `tsc` fails if an accepted form stops compiling, or a mistake stops being an error. */
export const accepted = [
  RateLimit({ name: 'burst', limit: 20 }),
  RateLimit([{ name: 'burst', limit: 20 }, DAILY]),
  RateLimit([DAILY] as const),
  RateLimit('gcra', 5, '1s', { name: 'burst' }),
];
export const mistakes = () => [
  // @ts-expect-error an override must name the policy it changes
  RateLimit([{ limit: 20 }]),
  // @ts-expect-error a misspelt field
  RateLimit({ name: 'burst', limmit: 20 }),
  // @ts-expect-error a field of the wrong type
  RateLimit({ name: 'burst', limit: '20' }),
  // @ts-expect-error an unknown algorithm
  RateLimit({ name: 'burst', algorithm: 'gcra2' }),
];
