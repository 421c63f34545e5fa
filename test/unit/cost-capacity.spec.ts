/**
 * A route policy whose fixed `cost` is more than its algorithm can ever admit fails at bootstrap, naming the
 * field, the value and the fix: `burst` is the capacity of the bucket algorithms (defaulting to `limit`), `limit`
 * that of the others. What is known only per request (a cost or limit function) and programmatic calls keep
 * being answered with a rejection.
 */
import { Controller, Get, type Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  RateLimit,
  RateLimiterService,
  RateLimitModule,
  type RateLimitModuleOptions,
  type RateLimitPolicy,
  type RateLimitPolicyOverride,
} from '../../lib';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import { buildRoutePlan } from '../../lib/routes/route-plan';

const registry = new RateLimitAlgorithmRegistry();
const plan = (policies: RateLimitPolicy[]) =>
  buildRoutePlan({ policies, where: '@RateLimit on C.h', route: 'C.h', scopeKey: 'r=C.h' }, registry);
const fails = (policy: RateLimitPolicy) => {
  try {
    plan([policy]);
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a RateLimitConfigError');
};

describe('a fixed cost above the capacity', () => {
  it.each(['fixed-window', 'sliding-window', 'sliding-log'] as const)('fails on %s when it is above limit', (algorithm) => {
    expect(fails({ name: 'big', algorithm, limit: 3, window: '1m', cost: 5 })).toBe(
      `@RateLimit on C.h: cost: 5 is more than policy 'big' (${algorithm}) can ever admit, its limit of 3, so every request would be rejected; lower cost to at most 3, or raise limit to at least 5.`,
    );
  });

  it.each(['token-bucket', 'gcra', 'leaky-bucket'] as const)('fails on %s when it is above burst, whatever limit is', (algorithm) => {
    expect(fails({ name: 'big', algorithm, limit: 100, burst: 3, window: '1m', cost: 5 })).toBe(
      `@RateLimit on C.h: cost: 5 is more than policy 'big' (${algorithm}) can ever admit, its burst of 3, so every request would be rejected; lower cost to at most 3, or raise burst to at least 5.`,
    );
    // A burst above the limit admits a cost the limit alone would not.
    expect(plan([{ algorithm, limit: 3, burst: 5, window: '1m', cost: 5 }]).policies).toHaveLength(1);
  });

  it('names limit, and burst as its default, on a bucket without burst', () => {
    expect(fails({ name: 'tb', algorithm: 'token-bucket', limit: 3, window: '1m', cost: 4 })).toBe(
      `@RateLimit on C.h: cost: 4 is more than policy 'tb' (token-bucket) can ever admit, its limit of 3, so every request would be rejected; lower cost to at most 3, or raise limit (or set burst, which defaults to limit) to at least 4.`,
    );
  });

  it('fails on concurrency when it is above the leases held at once (limit)', () => {
    expect(fails({ name: 'jobs', algorithm: 'concurrency', limit: 2, window: '1m', cost: 3 })).toContain(
      "cost: 3 is more than policy 'jobs' (concurrency) can ever admit, its limit of 2,",
    );
  });

  it('fails on a calendar window, whose limit is per period', () => {
    const calendar = { calendar: 'day', timeZone: 'Europe/Paris' } as const;
    expect(fails({ name: 'daily', algorithm: 'fixed-window', limit: 3, window: calendar, cost: 4 })).toContain(
      "cost: 4 is more than policy 'daily' (fixed-window) can ever admit, its limit of 3,",
    );
    expect(plan([{ name: 'daily', algorithm: 'fixed-window', limit: 3, window: calendar, cost: 3 }]).policies).toHaveLength(1);
  });

  it('accepts a cost equal to the capacity, and 0', () => {
    expect(plan([{ algorithm: 'fixed-window', limit: 3, window: '1m', cost: 3 }]).policies).toHaveLength(1);
    expect(plan([{ algorithm: 'gcra', limit: 3, window: '1m', cost: 0 }]).policies).toHaveLength(1);
  });

  it('leaves what is known only per request to the request: a cost function, a limit function without burst', () => {
    expect(plan([{ algorithm: 'fixed-window', limit: 3, window: '1m', cost: () => 5 }]).policies).toHaveLength(1);
    expect(plan([{ algorithm: 'token-bucket', limit: () => 3, window: '1m', cost: 5 }]).policies).toHaveLength(1);
    expect(plan([{ algorithm: 'fixed-window', limit: () => 3, window: '1m', burst: 1, cost: 5 }]).policies).toHaveLength(1);
  });

  it('fails on a bucket whose burst is fixed even when its limit is a function', () => {
    expect(fails({ name: 'b', algorithm: 'gcra', limit: () => 100, burst: 2, window: '1m', cost: 5 })).toContain(
      "cost: 5 is more than policy 'b' (gcra) can ever admit, its burst of 2,",
    );
  });
});

describe('at bootstrap', () => {
  const init = async (controllers: Type<unknown>[], options: RateLimitModuleOptions) => {
    const moduleRef = await Test.createTestingModule({ imports: [RateLimitModule.forRoot(options)], controllers }).compile();
    try {
      await moduleRef.init();
    } finally {
      await moduleRef.close();
    }
  };
  const DEFAULT: RateLimitPolicy = { name: 'default', algorithm: 'fixed-window', limit: 10, window: '1m', cost: 5 };

  it('fails app.init() for a route policy, naming the route', async () => {
    @Controller()
    class ExportsController {
      @Get()
      @RateLimit({ name: 'exports', algorithm: 'token-bucket', limit: 10, burst: 2, window: '1h', cost: 3 })
      run() {}
    }
    await expect(init([ExportsController], {})).rejects.toThrow(
      "@RateLimit on ExportsController.run: cost: 3 is more than policy 'exports' (token-bucket) can ever admit, its burst of 2,",
    );
  });

  it('fails for the defaultPolicy itself', async () => {
    await expect(init([], { defaultPolicy: { ...DEFAULT, limit: 4 } })).rejects.toThrow(
      "RateLimitModule options: defaultPolicy: cost: 5 is more than policy 'default' (fixed-window) can ever admit, its limit of 4,",
    );
  });

  it('checks an override as merged into what the route inherits, naming both places', async () => {
    @Controller()
    class LoweredController {
      @Get()
      @RateLimit({ name: 'default', limit: 3 } as RateLimitPolicyOverride)
      run() {}
    }
    await expect(init([LoweredController], { defaultPolicy: DEFAULT })).rejects.toThrow(
      "@RateLimit on LoweredController.run over RateLimitModule options: defaultPolicy: cost: 5 is more than policy 'default' (fixed-window) can ever admit, its limit of 3,",
    );

    @Controller()
    class CheaperController {
      @Get()
      @RateLimit({ name: 'default', limit: 3, cost: 1 } as RateLimitPolicyOverride)
      run() {}
    }
    await expect(init([CheaperController], { defaultPolicy: DEFAULT })).resolves.toBeUndefined();
  });

  it('leaves programmatic calls as they were: a cost above the capacity is a rejection that never clears, not a throw', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [RateLimitModule.forRoot({})] }).compile();
    await moduleRef.init();
    try {
      const service = moduleRef.get(RateLimiterService);
      const three: RateLimitPolicy = { name: 'three', algorithm: 'fixed-window', limit: 3, window: '1m' };
      const perCall = await service.consume(three, 'k', { cost: 4 });
      expect(perCall).toMatchObject({ allowed: false, policy: 'three', limit: 3, remaining: 3, retryAfterMs: Infinity });
      const inPolicy = await service.consume({ ...three, cost: 4 }, 'k');
      expect(inPolicy).toMatchObject({ allowed: false, remaining: 3, retryAfterMs: Infinity });
    } finally {
      await moduleRef.close();
    }
  });
});
