/**
 * Policy `reserve`: validated at bootstrap with messages that say what to change; the units held per
 * criticality (rounded to the nearest unit, at least 1, never the whole capacity); and what the memory store
 * and RateLimiterService decide with them: each class admitted to its share, only the cost charged, the
 * refusal's reason `'reserved'`, `remaining` as the class sees it, runtime overrides and hot-key shedding.
 */
import { RateLimiterService, type RateLimitPolicy } from '../../lib';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitCriticality } from '../../lib/interfaces/overload.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { SheddingStore } from '../../lib/pipeline/shedding.store';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { heldUnits, reserveHold } from '../../lib/policy/compile-reserve';
import { buildRoutePlan } from '../../lib/routes/route-plan';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import type { DecisionMode, RateLimitCall, StoreDecision } from '../../lib/stores/store.interface';
import { RateLimitTestClock } from '../../lib/testing';

const registry = new RateLimitAlgorithmRegistry();

function fails(policy: unknown): string {
  try {
    buildRoutePlan({ policies: [policy as RateLimitPolicy], where: '@RateLimit on C.h', route: 'C.h', scopeKey: 'r=C.h' }, registry);
  } catch (error) {
    expect(error).toBeInstanceOf(RateLimitConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a RateLimitConfigError');
}

describe('reserve at bootstrap', () => {
  const base = { algorithm: 'fixed-window', limit: 100, window: '1m' } as const;

  it('refuses what is not a set of shares, naming the field, the value and what is allowed', () => {
    expect(fails({ ...base, reserve: 0.2 })).toBe(
      "@RateLimit on C.h: reserve: 0.2 must be an object of shares of the capacity, such as { critical: 0.2 } (20 % kept for 'critical' requests) or { critical: 0.2, default: 0.1 }.",
    );
    expect(fails({ ...base, reserve: { sheddable: 0.1 } })).toBe(
      "@RateLimit on C.h: reserve: unknown field 'sheddable'; a reserve keeps a share for 'critical' and one for 'default' requests (and those above them): 'sheddable' ones, the least critical, keep none.",
    );
    expect(fails({ ...base, reserve: { critical: 1 } })).toBe(
      '@RateLimit on C.h: reserve: critical: 1 must be a share of the capacity from 0 up to, not including, 1 (0.2 keeps 20 %).',
    );
    expect(fails({ ...base, reserve: { default: -0.1 } })).toBe(
      '@RateLimit on C.h: reserve: default: -0.1 must be a share of the capacity from 0 up to, not including, 1 (0.2 keeps 20 %).',
    );
    expect(fails({ ...base, reserve: { critical: '20%' } })).toMatch(/^@RateLimit on C\.h: reserve: critical: "20%" must be a share/);
    expect(fails({ ...base, reserve: { critical: 0.7, default: 0.3 } })).toBe(
      "@RateLimit on C.h: reserve: critical + default is 1; together the shares must stay below 1, or no request below 'critical' could ever be admitted.",
    );
  });

  it('refuses it with slice, and on an adaptive policy points to adaptive.partitions', () => {
    expect(fails({ algorithm: 'token-bucket', limit: 100, window: '1s', slice: 5, reserve: { critical: 0.2 } })).toBe(
      '@RateLimit on C.h: slice: cannot be combined with reserve: a slice is spent in-process without asking the store, so the share kept for more critical requests would be spent too.',
    );
    expect(fails({ algorithm: 'adaptive', limit: 100, reserve: { critical: 0.2 } })).toBe(
      '@RateLimit on C.h: reserve does not apply to an adaptive policy, whose limit moves with latency; share it between criticalities with adaptive.partitions, such as { partitions: { critical: 0.2, default: 0.8 } }.',
    );
  });

  it('is accepted on every algorithm of the store', () => {
    for (const algorithm of RATE_LIMIT_ALGORITHMS) {
      const plan = buildRoutePlan(
        { policies: [{ algorithm, limit: 10, window: '1m', reserve: { critical: 0.2 } }], where: 'w', route: 'C.h', scopeKey: 'r=C.h' },
        registry,
      );
      expect(plan.reserves).toBe(true);
    }
  });
});

describe('the units held', () => {
  it('are the share of the capacity to the nearest unit, at least 1 for a share above 0, never the whole capacity', () => {
    expect([heldUnits(0.2, 100), heldUnits(0.1 + 0.2, 100), heldUnits(0.07, 100), heldUnits(0.2, 7), heldUnits(0.25, 10)]).toEqual([
      20, 30, 7, 1, 3,
    ]);
    expect([heldUnits(0.01, 10), heldUnits(0, 10), heldUnits(0.9, 2), heldUnits(0.5, 1)]).toEqual([1, 0, 1, 0]);
  });

  it("per criticality: 'critical' holds none, 'default' the critical share, 'sheddable' both; of burst for the buckets", () => {
    const of = (policy: RateLimitPolicy, criticality: RateLimitCriticality, params = compiled(policy).staticParams!) =>
      reserveHold(compiled(policy), params, criticality);
    const compiled = (policy: RateLimitPolicy) => compilePolicy(policy, registry, 'test', 'svc');
    const window: RateLimitPolicy = { algorithm: 'sliding-window', limit: 100, window: '1m', reserve: { critical: 0.2, default: 0.1 } };
    expect((['critical', 'default', 'sheddable'] as const).map((c) => of(window, c))).toEqual([0, 20, 30]);
    const bucket: RateLimitPolicy = { algorithm: 'gcra', limit: 10, window: '1s', burst: 50, reserve: { critical: 0.2 } };
    expect((['critical', 'default', 'sheddable'] as const).map((c) => of(bucket, c))).toEqual([0, 10, 10]);
    // Another capacity (a limit function's, a runtime override's) is worked out again.
    expect(of(window, 'sheddable', { limit: 40, windowMs: 60_000, burst: 40 })).toBe(12);
    expect(of({ algorithm: 'fixed-window', limit: 100, window: '1m' }, 'sheddable')).toBe(0);
  });
});

describe('RateLimiterService with a reserve, on the memory store', () => {
  let clock: RateLimitTestClock;
  let limiter: RateLimiterService;
  beforeEach(() => {
    clock = new RateLimitTestClock();
    limiter = new RateLimiterService(new RateLimitEngine(new MemoryStore({ clock: clock.now })), registry, {});
  });

  /** Consumes one unit at `priority` until refused; returns how many were admitted and the refusal. */
  async function admitted(policy: RateLimitPolicy, key: string, priority: RateLimitCriticality) {
    for (let n = 0; ; n++) {
      const d = await limiter.consume(policy, key, { priority });
      if (!d.allowed) return { n, refusal: d };
    }
  }

  it.each(RATE_LIMIT_ALGORITHMS)(
    '%s: sheddable gets 70, default 80, critical 100 of 100 with { critical: 0.2, default: 0.1 }',
    async (algorithm) => {
      const policy: RateLimitPolicy = { algorithm, limit: 100, window: '1h', reserve: { critical: 0.2, default: 0.1 } };
      const shed = await admitted(policy, 'k', 'sheddable');
      expect(shed.n).toBe(70);
      expect(shed.refusal).toMatchObject({ allowed: false, reason: 'reserved', remaining: 0 });
      expect(shed.refusal.retryAfterMs).toBeGreaterThan(0);
      const def = await admitted(policy, 'k', 'default');
      expect(def.n).toBe(10);
      expect(def.refusal).toMatchObject({ reason: 'reserved', remaining: 0 });
      const crit = await admitted(policy, 'k', 'critical');
      expect(crit.n).toBe(20);
      // The counter itself refuses now: the plain limit, for every class.
      expect(crit.refusal.reason).toBeUndefined();
      expect((await limiter.consume(policy, 'k')).reason).toBeUndefined();
    },
  );

  it("reports remaining as the call's class may take it; a peek charges nothing; 'default' unless told", async () => {
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 10, window: '1h', reserve: { critical: 0.3 } };
    expect(await limiter.consume(policy, 'k')).toMatchObject({ allowed: true, remaining: 6, limit: 10 });
    expect(await limiter.consume(policy, 'k', { priority: 'critical' })).toMatchObject({ allowed: true, remaining: 8 });
    expect(await limiter.peek(policy, 'k')).toMatchObject({ allowed: true, remaining: 5 });
    expect(await limiter.peek(policy, 'k', { priority: 'critical' })).toMatchObject({ allowed: true, remaining: 8 });
    const cost6 = await limiter.consume(policy, 'k', { cost: 6 });
    expect(cost6).toMatchObject({ allowed: false, reason: 'reserved', remaining: 5 });
    // A cost no 'default' call can ever fit (8 > 10 − 3): never, whatever the wait.
    expect(await limiter.consume(policy, 'other', { cost: 8 })).toMatchObject({ allowed: false, reason: 'cost-exceeds-capacity' });
    expect(await limiter.consume(policy, 'other', { cost: 8, priority: 'critical' })).toMatchObject({ allowed: true, remaining: 2 });
    await expect(limiter.consume(policy, 'k', { priority: 'urgent' as RateLimitCriticality })).rejects.toThrow(
      `priority: "urgent" must be 'critical', 'default' or 'sheddable'.`,
    );
  });

  it('starts no lockout on a refusal by the reserve, and does on a refusal by the counter', async () => {
    const policy: RateLimitPolicy = { algorithm: 'gcra', limit: 5, window: '1h', blockFor: '1h', reserve: { critical: 0.2 } };
    expect((await admitted(policy, 'k', 'default')).n).toBe(4);
    expect((await admitted(policy, 'k', 'critical')).n).toBe(1);
    const blocked = await limiter.consume(policy, 'k', { priority: 'critical' });
    expect(blocked).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: 3_600_000 });
  });

  it('consumeAll, lease: all or nothing with the reserve, and a lease of a critical call past the default share', async () => {
    const quota: RateLimitPolicy = { algorithm: 'token-bucket', name: 'q', limit: 10, window: '1h', reserve: { critical: 0.5 } };
    const outer: RateLimitPolicy = { algorithm: 'fixed-window', name: 'o', limit: 100, window: '1h' };
    for (let i = 0; i < 5; i++) expect((await limiter.consumeAll([quota, outer], 'k')).allowed).toBe(true);
    const refused = await limiter.consumeAll([quota, outer], 'k');
    expect(refused.decisions.map((d) => [d.allowed, d.reason])).toEqual([
      [false, 'reserved'],
      [true, undefined],
    ]);
    // Nothing was charged: the outer policy still has 95.
    expect((await limiter.peek(outer, 'k')).remaining).toBe(95);
    const slots: RateLimitPolicy = { algorithm: 'concurrency', limit: 4, window: '1m', reserve: { critical: 0.25 } };
    const leases = await Promise.all([1, 2, 3].map(() => limiter.lease(slots, 'k')));
    expect(leases.map((l) => l.decision.allowed)).toEqual([true, true, true]);
    expect((await limiter.lease(slots, 'k')).decision).toMatchObject({ allowed: false, reason: 'reserved' });
    expect((await limiter.lease(slots, 'k', { priority: 'critical' })).decision.allowed).toBe(true);
    await leases[0].release();
    expect((await limiter.lease(slots, 'k')).decision.allowed).toBe(false);
    expect((await limiter.lease(slots, 'k', { priority: 'critical' })).decision.allowed).toBe(true);
  });

  it("a runtime override's limit holds the same share of it", async () => {
    const policy: RateLimitPolicy = { algorithm: 'sliding-log', name: 'p', limit: 100, window: '1h', reserve: { critical: 0.2 } };
    await limiter.consume(policy, 'k', { cost: 0 });
    await limiter.setOverride('p', 'k', { limit: 10 });
    expect((await admitted(policy, 'k', 'default')).n).toBe(8);
    expect((await admitted(policy, 'k', 'critical')).n).toBe(2);
  });
});

describe('hot-key shedding and a reserve', () => {
  it("does not answer a critical call with a default call's refusal by the reserve", async () => {
    const inner = new MemoryStore();
    const asked: string[] = [];
    // The memory store as a remote one: no in-process answer, every decision counted.
    const counting = Object.assign(Object.create(inner) as MemoryStore, {
      decideSync: undefined,
      decide: (calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> => {
        asked.push(`${calls[0].hold}`);
        return inner.decide(calls, mode);
      },
    });
    const store = new SheddingStore(counting, 100);
    const compiled = compilePolicy(
      { algorithm: 'fixed-window', limit: 5, window: '1h', reserve: { critical: 0.2 } },
      registry,
      'test',
      'svc',
    );
    const engine = new RateLimitEngine(store);
    const request = [{ compiled, params: compiled.staticParams!, cost: 1 }];
    const calls = (criticality: RateLimitCriticality) => engine.calls(trackerKeyPrefix('rl', 'k'), request, criticality);
    for (let i = 0; i < 4; i++) expect((await store.decide(calls('default'), 'consume')).allowed).toBe(true);
    expect((await store.decide(calls('default'), 'consume')).verdicts[0].reason).toBe(6);
    // The same default call is shed now; a critical one is asked, and admitted.
    expect(store.decideSync(calls('default'), 'consume')).toMatchObject({ allowed: false });
    expect(store.decideSync(calls('critical'), 'consume')).toBeUndefined();
    expect((await store.decide(calls('critical'), 'consume')).allowed).toBe(true);
    expect(asked).toEqual(['1', '1', '1', '1', '1', '0']);
  });
});
