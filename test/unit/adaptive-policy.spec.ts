import 'reflect-metadata';
import { Controller, Get } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { RateLimit, RateLimitConfigError, RateLimitModule, RateLimiterService, type RateLimitAdaptivePolicy } from '../../lib';
import { compileAdaptivePolicy } from '../../lib/overload/adaptive-policy';

const AT = '@RateLimit on C.h';

function errorOf(policy: unknown): string {
  try {
    compileAdaptivePolicy(policy as RateLimitAdaptivePolicy, AT);
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitConfigError);
    return (error as Error).message;
  }
  throw new Error('no error');
}

describe('adaptive policies', () => {
  it("fill in concurrency-limits' defaults, each within the limit", () => {
    const pick = ({ name, strategy, min, initial }: ReturnType<typeof compileAdaptivePolicy>) => ({ name, strategy, min, initial });
    expect(pick(compileAdaptivePolicy({ algorithm: 'adaptive', limit: 200 }, AT))).toEqual({
      name: 'adaptive',
      strategy: 'vegas',
      min: 1,
      initial: 20,
    });
    expect(pick(compileAdaptivePolicy({ algorithm: 'adaptive', limit: 200, adaptive: { strategy: 'gradient' } }, AT))).toEqual({
      name: 'adaptive',
      strategy: 'gradient',
      min: 20,
      initial: 20,
    });
    expect(pick(compileAdaptivePolicy({ algorithm: 'adaptive', limit: 8, adaptive: { strategy: 'aimd' } }, AT))).toEqual({
      name: 'adaptive',
      strategy: 'aimd',
      min: 8,
      initial: 8,
    });
    expect(pick(compileAdaptivePolicy({ algorithm: 'adaptive', limit: 100, name: 'db', adaptive: { min: 30 } }, AT))).toEqual({
      name: 'db',
      strategy: 'vegas',
      min: 30,
      initial: 30,
    });
  });

  it.each([
    [{ algorithm: 'adaptive', limit: 0 }, `${AT}: limit: 0 must be a whole number ≥ 1 (the most requests in flight).`],
    [
      { algorithm: 'adaptive', limit: 10, window: '1s' },
      `${AT}: 'window' does not apply to an adaptive policy (a per-instance limit on requests in flight, for every client); its fields are algorithm, limit, name, adaptive.`,
    ],
    [
      { algorithm: 'adaptive', limit: 10, adaptive: { strategy: 'bbr' } },
      `${AT}: adaptive.strategy: "bbr" must be one of 'vegas', 'gradient', 'aimd'.`,
    ],
    [{ algorithm: 'adaptive', limit: 10, adaptive: { min: 11 } }, `${AT}: adaptive.min: 11 must be a whole number from 1 to limit (10).`],
    [
      { algorithm: 'adaptive', limit: 10, adaptive: { min: 5, initial: 4 } },
      `${AT}: adaptive.initial: 4 must be a whole number from adaptive.min (5) to limit (10).`,
    ],
    [
      { algorithm: 'adaptive', limit: 10, adaptive: { partitions: { critical: 0.7, sheddable: 0.5 } } },
      `${AT}: adaptive.partitions: the shares add up to 1.2, more than 1; for example { critical: 0.5, default: 0.4, sheddable: 0.1 }.`,
    ],
    [
      { algorithm: 'adaptive', limit: 10, adaptive: { partitions: { live: 0.5 } } },
      `${AT}: adaptive.partitions: 'live' is not a criticality; use 'critical', 'default' or 'sheddable'.`,
    ],
    [
      { algorithm: 'adaptive', limit: 10, adaptive: { probe: 1 } },
      `${AT}: unknown field 'adaptive.probe'; known fields are strategy, min, initial, partitions.`,
    ],
  ])('rejects %j at bootstrap, naming the field', (policy, message) => {
    expect(errorOf(policy)).toBe(message);
  });

  it('fail app.init() from a route, and may not share a name with a store policy of the route', async () => {
    @Controller()
    class Twice {
      @Get()
      @RateLimit([
        { algorithm: 'fixed-window', limit: 5, window: '1m', name: 'x' },
        { algorithm: 'adaptive', limit: 5, name: 'x' },
      ])
      h() {}
    }
    const moduleRef = await Test.createTestingModule({ imports: [RateLimitModule.forRoot()], controllers: [Twice] }).compile();
    await expect(moduleRef.init()).rejects.toThrow(
      "@RateLimit on Twice.h: name: two policies are named 'x'; give each policy of a route its own name.",
    );
  });
});

describe('RateLimiterService.admit', () => {
  async function service(): Promise<RateLimiterService> {
    const moduleRef = await Test.createTestingModule({ imports: [RateLimitModule.forRoot()] }).compile();
    await moduleRef.init();
    return moduleRef.get(RateLimiterService);
  }

  it('admits work up to the limit in flight, refuses beyond it, and frees a slot on release (once)', async () => {
    const limiter = await service();
    const pdf: RateLimitAdaptivePolicy = { algorithm: 'adaptive', name: 'pdf', limit: 16, adaptive: { initial: 2 } };
    const a = limiter.admit(pdf);
    const b = limiter.admit(pdf);
    expect([a.decision, b.decision].map(({ allowed, remaining, limit }) => ({ allowed, remaining, limit }))).toEqual([
      { allowed: true, remaining: 1, limit: 2 },
      { allowed: true, remaining: 0, limit: 2 },
    ]);
    const refused = limiter.admit(pdf);
    expect(refused.decision).toMatchObject({ allowed: false, policy: 'pdf', remaining: 0 });
    expect(refused.decision.retryAfterMs).toBeGreaterThanOrEqual(1);
    refused.release();
    a.release();
    a.release();
    expect(limiter.admit(pdf).decision.allowed).toBe(true);
    expect(limiter.admit(pdf).decision.allowed).toBe(false);
  });

  it('keeps one limiter per name, refusing a second configuration under the same name', async () => {
    const limiter = await service();
    limiter.admit({ algorithm: 'adaptive', name: 'jobs', limit: 16 });
    expect(() => limiter.admit({ algorithm: 'adaptive', name: 'jobs', limit: 32 })).toThrow(
      "RateLimiterService.admit: policy 'jobs' was first used with another configuration; give each adaptive limit its own name.",
    );
    expect(() => limiter.admit({ algorithm: 'fixed-window', limit: 1 } as unknown as RateLimitAdaptivePolicy)).toThrow(
      RateLimitConfigError,
    );
  });

  it('partitions by the priority given', async () => {
    const limiter = await service();
    const policy: RateLimitAdaptivePolicy = {
      algorithm: 'adaptive',
      name: 'mixed',
      limit: 16,
      adaptive: { initial: 2, partitions: { critical: 0.5 } },
    };
    expect([limiter.admit(policy), limiter.admit(policy)].every((a) => a.decision.allowed)).toBe(true);
    expect(limiter.admit(policy, { priority: 'default' }).decision.allowed).toBe(false);
    expect(limiter.admit(policy, { priority: 'critical' }).decision.allowed).toBe(true);
    expect(limiter.admit(policy, { priority: 'critical' }).decision.allowed).toBe(false);
  });
});
