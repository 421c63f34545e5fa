/**
 * The memory store's plain path (`consumePlain`, which `RateLimiterService.consume` takes) against its full
 * decision (`decideSync`, which the guard takes): both run the same rules (`MemoryRules`), so for any trace of
 * consumes, peeks, refunds and lockouts they must give the same verdict, field by field, and leave the same
 * keys. Two stores on one fake clock replay each trace, one consuming through each path; a consume the plain
 * path declines (once a lockout was written) goes through `decideSync`, as the engine sends it.
 */
import fc from 'fast-check';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { compilePolicy } from '../../lib/policy/compile-policy';
import type { LruMap } from '../../lib/shared/lru-map';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import type { KeySlot, RateLimitCall, StoreVerdict } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';

/** Every algorithm the plain path takes (`concurrency` holds leases: never plain). */
const ALGORITHMS: RateLimitAlgorithmName[] = ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra', 'leaky-bucket'];
const T0 = 1_700_000_000_000;

type Op = 'consume' | 'peek' | 'refund' | 'block';

interface Step {
  gapMs: number;
  op: Op;
  cost: number;
}

const registry = new RateLimitAlgorithmRegistry();

const stepArb: fc.Arbitrary<Step> = fc.record({
  gapMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 400 })),
  op: fc.oneof(
    { arbitrary: fc.constant<Op>('consume'), weight: 8 },
    { arbitrary: fc.constant<Op>('peek'), weight: 1 },
    { arbitrary: fc.constant<Op>('refund'), weight: 1 },
    { arbitrary: fc.constant<Op>('block'), weight: 1 },
  ),
  // Up to two units beyond the largest capacity below: the capacity rule is on the plain path too.
  cost: fc.integer({ min: 0, max: 8 }),
});

const policyArb = (algorithm: RateLimitAlgorithmName): fc.Arbitrary<RateLimitPolicy> =>
  fc
    .record({
      algorithm: fc.constant(algorithm),
      limit: fc.integer({ min: 1, max: 5 }),
      window: fc.integer({ min: 50, max: 300 }),
      burst: fc.integer({ min: 1, max: 6 }),
    })
    .map((p) => (['token-bucket', 'gcra', 'leaky-bucket'].includes(algorithm) ? p : { ...p, burst: undefined }));

/** Every live key with its value and expiry, sorted: what the store decides next from. */
function keysOf(store: MemoryStore, now: number): string {
  const { entries } = (store as unknown as { keyspace: { entries: LruMap<unknown> } }).keyspace;
  const live = [...entries].filter(([key]) => now <= entries.getNode(key)!.expiresAt);
  return JSON.stringify(live.sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, value]) => [key, value, entries.getNode(key)!.expiresAt]));
}

function replay(policy: RateLimitPolicy, steps: readonly Step[]): void {
  let now = T0;
  const full = new MemoryStore({ clock: () => now });
  const plain = new MemoryStore({ clock: () => now });
  const engine = new RateLimitEngine(full);
  const compiled = compilePolicy({ ...policy, name: 'p' }, registry, 'test', 'svc');
  const prefix = trackerKeyPrefix('rl', 'plain');
  const callOf = (cost: number): RateLimitCall => engine.calls(prefix, [{ compiled, params: compiled.staticParams!, cost }])[0];
  const slot: KeySlot = { key: callOf(0).stateKey, entry: undefined };
  let taken = 0;
  for (const [i, step] of steps.entries()) {
    now += step.gapMs;
    const call = callOf(step.cost);
    if (step.op === 'block') {
      void full.block([call], 10 + step.cost * 20);
      void plain.block([call], 10 + step.cost * 20);
    } else if (step.op === 'refund') {
      const back = callOf(Math.min(step.cost, taken));
      void full.refund([back]);
      void plain.refund([back]);
    } else if (step.op === 'peek') {
      expect(plain.decideSync([call], 'peek')).toEqual(full.decideSync([call], 'peek'));
    } else {
      const expected: StoreVerdict = full.decideSync([call], 'consume').verdicts[0];
      const answered = plain.consumePlain(slot, compiled.algorithm, compiled.staticParams!, step.cost);
      const got = answered === undefined ? plain.decideSync([call], 'consume').verdicts[0] : { ...answered };
      if (JSON.stringify(got) !== JSON.stringify(expected)) {
        throw new Error(`step ${i} (${JSON.stringify(step)}): plain ${JSON.stringify(got)}, full ${JSON.stringify(expected)}`);
      }
      if (expected.allowed) taken += step.cost;
    }
    expect(keysOf(plain, now)).toBe(keysOf(full, now));
  }
}

describe('MemoryStore: the plain path decides as decideSync', () => {
  it.each(ALGORITHMS)('%s: random traces of consume / peek / refund / block', (algorithm) => {
    fc.assert(
      fc.property(policyArb(algorithm), fc.array(stepArb, { minLength: 1, maxLength: 40 }), (policy, steps) => replay(policy, steps)),
      { numRuns: 150 },
    );
  });

  it('answers a cost beyond the capacity itself, as decideSync: never fits, retry −1, nothing charged', () => {
    const store = new MemoryStore({ clock: () => T0 });
    const compiled = compilePolicy({ algorithm: 'fixed-window', limit: 3, window: 1000, name: 'p' }, registry, 'test', 'svc');
    const slot: KeySlot = { key: 'rl:{k}:p', entry: undefined };
    const v = store.consumePlain(slot, compiled.algorithm, compiled.staticParams!, 4);
    expect(v).toEqual({
      allowed: false,
      remaining: 3,
      resetMs: 0,
      retryAfterMs: -1,
      delayMs: 0,
      moreQuotaMs: 0,
      reason: Verdict.CostExceedsCapacity,
    });
    expect(store.size).toBe(0);
  });

  it('declines once a lockout was written: it has no lockout key to read', async () => {
    let now = T0;
    const store = new MemoryStore({ clock: () => now });
    const engine = new RateLimitEngine(store);
    const compiled = compilePolicy({ algorithm: 'fixed-window', limit: 3, window: 1000, name: 'p' }, registry, 'test', 'svc');
    const [call] = engine.calls(trackerKeyPrefix('rl', 'k'), [{ compiled, params: compiled.staticParams!, cost: 1 }]);
    const slot: KeySlot = { key: call.stateKey, entry: undefined };
    expect(store.consumePlain(slot, compiled.algorithm, compiled.staticParams!, 1)).toMatchObject({ allowed: true, remaining: 2 });
    await store.block([call], 500);
    expect(store.consumePlain(slot, compiled.algorithm, compiled.staticParams!, 1)).toBeUndefined();
    expect(store.decideSync([call], 'consume').verdicts[0]).toMatchObject({ allowed: false, reason: Verdict.Blocked, retryAfterMs: 500 });
    now += 500;
    expect(store.decideSync([call], 'consume').verdicts[0]).toMatchObject({ allowed: true, remaining: 1 });
  });
});
