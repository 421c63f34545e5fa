/**
 * GCRA and the token bucket are two representations of one rule (shared/ALGORITHMS.md): with the same limit,
 * window and burst they must give the same decision, field by field, for any sequence of calls. Proven on
 * the memory store (the TypeScript twins; the differential test proves the Lua scripts equal the twins)
 * with a fake clock over random traces: integer ms gaps from 0 to beyond a full refill, costs 0..burst+1
 * (so "cost exceeds capacity" is covered), consume / peek / refund.
 */
import fc from 'fast-check';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import type { StoreDecision } from '../../lib/stores/store.interface';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';

const registry = new RateLimitAlgorithmRegistry();

interface Params {
  limit: number;
  windowMs: number;
  burst: number;
}

interface Step {
  /** ms to advance the clock before the call, as a fraction of the window (so big and small windows both roll over). */
  gap: number;
  /** 0..burst+1, scaled from [0, 1]. */
  costFraction: number;
  op: 'consume' | 'peek' | 'refund';
}

const paramsArb: fc.Arbitrary<Params> = fc.oneof(
  fc.record({ limit: fc.integer({ min: 1, max: 10 }), windowMs: fc.integer({ min: 1, max: 50 }), burst: fc.integer({ min: 1, max: 10 }) }),
  fc.record({
    limit: fc.integer({ min: 1, max: 1000 }),
    windowMs: fc.integer({ min: 1, max: 120_000 }),
    burst: fc.integer({ min: 1, max: 1000 }),
  }),
);

const stepArb: fc.Arbitrary<Step> = fc.record({
  gap: fc.oneof(
    { arbitrary: fc.constant(0), weight: 3 },
    { arbitrary: fc.double({ min: 0, max: 0.05, noNaN: true }), weight: 3 },
    { arbitrary: fc.double({ min: 0, max: 3, noNaN: true }), weight: 2 },
  ),
  costFraction: fc.double({ min: 0, max: 1, noNaN: true }),
  op: fc.constantFrom<Step['op']>('consume', 'consume', 'consume', 'peek', 'refund'),
});

/** Runs the same trace on both algorithms; returns the first difference, or undefined. */
async function compare(params: Params, start: number, steps: Step[]): Promise<string | undefined> {
  let clock = start;
  const store = new MemoryStore({ clock: () => clock });
  const engine = new RateLimitEngine(store);
  const [tb, gcra] = (['token-bucket', 'gcra'] as const).map((algorithm) =>
    compilePolicy({ algorithm, limit: params.limit, window: params.windowMs, burst: params.burst }, registry, 'test', 'svc'),
  );
  const prefix = trackerKeyPrefix('rl', 'equivalence');
  for (let i = 0; i < steps.length; i++) {
    const { gap, costFraction, op } = steps[i];
    clock += Math.floor(gap * params.windowMs);
    const cost = Math.min(Math.floor(costFraction * (params.burst + 2)), params.burst + 1);
    const [tbCall] = engine.calls(prefix, [{ compiled: tb, params: tb.staticParams!, cost }]);
    const [gcraCall] = engine.calls(prefix, [{ compiled: gcra, params: gcra.staticParams!, cost }]);
    if (op === 'refund') {
      await store.refund([tbCall]);
      await store.refund([gcraCall]);
      continue;
    }
    const a: StoreDecision = await store.decide([tbCall], op);
    const b: StoreDecision = await store.decide([gcraCall], op);
    if (JSON.stringify(a) !== JSON.stringify(b)) {
      return `step ${i} (${op}, cost ${cost}, t=${clock - start}): token-bucket ${JSON.stringify(a.verdicts[0])} vs gcra ${JSON.stringify(b.verdicts[0])}`;
    }
  }
  return undefined;
}

describe('gcra and token-bucket decide identically with the same limit, window and burst', () => {
  test('random traces (consume, peek, refund; costs 0..burst+1)', async () => {
    await fc.assert(
      fc.asyncProperty(
        paramsArb,
        fc.integer({ min: 0, max: 2 ** 42 }),
        fc.array(stepArb, { minLength: 1, maxLength: 60 }),
        async (params, start, steps) => {
          expect(await compare(params, start, steps)).toBeUndefined();
        },
      ),
      { numRuns: 5000 },
    );
  });

  test('a drained bucket refills one unit per window/limit ms in both (limit 3, window 1000, burst 3)', async () => {
    // Exact reference values: T = 1000/3 ms per unit, so one unit is back after ceil(1000/3) = 334 ms.
    const steps: Step[] = [
      { gap: 0, costFraction: 3 / 5, op: 'consume' }, // cost 3: all of the burst
      { gap: 0, costFraction: 1 / 5, op: 'consume' }, // rejected, retry 334
      { gap: 0.333, costFraction: 1 / 5, op: 'consume' }, // t=333: still rejected, retry 1
      { gap: 0.001, costFraction: 1 / 5, op: 'consume' }, // t=334: allowed
    ];
    expect(await compare({ limit: 3, windowMs: 1000, burst: 3 }, 1_000_000, steps)).toBeUndefined();

    let clock = 1_000_000;
    const store = new MemoryStore({ clock: () => clock });
    const engine = new RateLimitEngine(store);
    for (const algorithm of ['token-bucket', 'gcra'] as const) {
      const compiled = compilePolicy({ algorithm, limit: 3, window: 1000 }, registry, 'test', 'svc');
      const prefix = trackerKeyPrefix('rl', `exact-${algorithm}`);
      const decide = async (cost: number) =>
        (await engine.decide(prefix, [{ compiled, params: compiled.staticParams!, cost }], 'consume')).decisions[0];
      clock = 1_000_000;
      expect(await decide(3)).toEqual({
        allowed: true,
        policy: 'default',
        limit: 3,
        remaining: 0,
        resetMs: 1000,
        moreQuotaMs: 334,
        retryAfterMs: 0,
      });
      expect(await decide(1)).toEqual({
        allowed: false,
        policy: 'default',
        limit: 3,
        remaining: 0,
        resetMs: 1000,
        moreQuotaMs: 334,
        retryAfterMs: 334,
      });
      clock += 333;
      expect(await decide(1)).toEqual({
        allowed: false,
        policy: 'default',
        limit: 3,
        remaining: 0,
        resetMs: 667,
        moreQuotaMs: 1,
        retryAfterMs: 1,
      });
      clock += 1;
      // The next unit after a debt of 2998 of 3000: 998 scaled units to refill at 3 per ms.
      expect(await decide(1)).toEqual({
        allowed: true,
        policy: 'default',
        limit: 3,
        remaining: 0,
        resetMs: 1000,
        moreQuotaMs: 333,
        retryAfterMs: 0,
      });
      expect(await decide(4)).toEqual({
        allowed: false,
        policy: 'default',
        limit: 3,
        remaining: 0,
        resetMs: 1000,
        moreQuotaMs: 333,
        retryAfterMs: Infinity,
        reason: 'cost-exceeds-capacity',
      });
    }
  });
});
