/**
 * PolicyCache, behind RateLimiterService: a policy written inline (a new object per call) is compiled once,
 * found by a canonical string of its fields; a policy with a function is found by identity only; the
 * content side is bounded, and what a content-keyed policy decides cannot be changed through the caller's
 * object.
 */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { compilePolicy, type CompiledPolicy } from '../../lib/policy/compile-policy';
import { contentKey, PolicyCache } from '../../lib/policy/policy-cache';
import { memoryHarness } from '../support/memory-harness';

const registry = new RateLimitAlgorithmRegistry();

/** A cache over the real compiler that records every policy it had to compile. */
function counting(maxContentEntries?: number) {
  const compiledFrom: RateLimitPolicy[] = [];
  const cache = new PolicyCache(
    (policy) => {
      compiledFrom.push(policy);
      return compilePolicy(policy, registry, 'test', 'svc');
    },
    { maxContentEntries },
  );
  return { cache, compiledFrom };
}

describe('PolicyCache', () => {
  it('compiles equal inline objects once (the same fields in another order once more)', () => {
    const { cache, compiledFrom } = counting();
    const first = cache.get({ algorithm: 'gcra', limit: 10, window: '1s' });
    for (let i = 0; i < 100; i++) expect(cache.get({ algorithm: 'gcra', limit: 10, window: '1s' })).toBe(first);
    const reordered = cache.get({ window: '1s', limit: 10, algorithm: 'gcra' });
    for (let i = 0; i < 100; i++) expect(cache.get({ window: '1s', limit: 10, algorithm: 'gcra' })).toBe(reordered);
    expect(compiledFrom).toHaveLength(2);
    expect(first.staticParams).toEqual({ limit: 10, windowMs: 1_000, burst: 10 });
    expect(reordered.staticParams).toEqual(first.staticParams);
    expect(reordered.stateKeySuffix).toBe(first.stateKeySuffix);
  });

  it('tells apart policies that differ in any field, or only in the type of a value', () => {
    const { cache, compiledFrom } = counting();
    const variants: RateLimitPolicy[] = [
      { algorithm: 'fixed-window', limit: 10, window: 1_000 },
      { algorithm: 'fixed-window', limit: 10, window: '1000ms' },
      { algorithm: 'fixed-window', limit: 11, window: 1_000 },
      { algorithm: 'fixed-window', limit: 10, window: 1_000, name: 'a' },
      { algorithm: 'fixed-window', limit: 10, window: 1_000, scope: 'a' },
      { algorithm: 'fixed-window', limit: 10, window: 1_000, cost: 2 },
      { algorithm: 'fixed-window', limit: 10, window: 1_000, blockFor: '1m' },
      { algorithm: 'fixed-window', limit: 10, window: 1_000, mode: 'shadow' },
      { algorithm: 'fixed-window', limit: 10, window: 1_000, onStoreError: 'fail-closed' },
      { algorithm: 'fixed-window', limit: 10, window: 1_000, countOnly: 'failed' },
      { algorithm: 'fixed-window', limit: 10, window: 1_000, by: 'user' },
      { algorithm: 'leaky-bucket', limit: 10, window: 1_000 },
      { algorithm: 'leaky-bucket', limit: 10, window: 1_000, delay: false },
      { algorithm: 'leaky-bucket', limit: 10, window: 1_000, delay: true },
      { algorithm: 'leaky-bucket', limit: 10, window: 1_000, burst: 20 },
    ];
    const compiled = new Set(variants.map((policy) => cache.get({ ...policy })));
    expect(compiled.size).toBe(variants.length);
    expect(new Set(variants.map((policy) => contentKey(policy))).size).toBe(variants.length);
    for (const policy of variants) cache.get({ ...policy });
    expect(compiledFrom).toHaveLength(variants.length);
    // A value cannot pose as another field: field names and strings carry their length.
    expect(contentKey({ algorithm: 'gcra', limit: 1, window: 1, name: 'a5:scopes1:b' })).not.toBe(
      contentKey({ algorithm: 'gcra', limit: 1, window: 1, name: 'a', scope: 'b' }),
    );
    // A field present but undefined is compiled as absent, and kept apart (correct either way).
    expect(contentKey({ algorithm: 'gcra', limit: 1, window: 1, name: undefined })).not.toBe(
      contentKey({ algorithm: 'gcra', limit: 1, window: 1 }),
    );
  });

  it('compiles a frozen copy: changing the caller object later changes nothing it decided, and is seen as a new policy', () => {
    const { cache, compiledFrom } = counting();
    const policy: RateLimitPolicy & { limit: number } = { algorithm: 'fixed-window', limit: 5, window: '1m' };
    const before = cache.get(policy);
    expect(before.policy).not.toBe(policy);
    expect(Object.isFrozen(before.policy)).toBe(true);
    policy.limit = 6;
    policy.onStoreError = 'fail-closed';
    const after = cache.get(policy);
    expect(before.policy).toEqual({ algorithm: 'fixed-window', limit: 5, window: '1m' });
    expect(before.staticParams?.limit).toBe(5);
    expect(after.staticParams?.limit).toBe(6);
    expect(after.policy.onStoreError).toBe('fail-closed');
    expect(compiledFrom).toHaveLength(2);
  });

  it('sees a field added to, removed from or changed on a reused object, and finds it again once restored', () => {
    const { cache, compiledFrom } = counting();
    const policy: RateLimitPolicy & { limit: number; cost?: number } = { algorithm: 'fixed-window', limit: 5, window: '1m' };
    const five = cache.get(policy);
    expect(cache.get(policy)).toBe(five);
    policy.cost = 2;
    const costly = cache.get(policy);
    expect(costly).not.toBe(five);
    expect(costly.policy.cost).toBe(2);
    delete policy.cost;
    expect(cache.get(policy)).toBe(five);
    policy.limit = 0;
    expect(() => cache.get(policy)).toThrow(RateLimitConfigError);
    policy.limit = 5;
    expect(cache.get(policy)).toBe(five);
    // -0 is not 0 to the content key: a policy holding it is compiled by identity, as contentKey says.
    policy.cost = 0;
    const free = cache.get(policy);
    policy.cost = -0;
    const byIdentity = cache.get(policy);
    expect(byIdentity).not.toBe(free);
    expect(byIdentity.policy).toBe(policy);
    expect(compiledFrom).toHaveLength(5);
  });

  it('finds a policy with a function by identity only: the same object once, every new object again', () => {
    const { cache, compiledFrom } = counting();
    const by = () => 'tenant';
    const skipIf = () => false;
    const reused: RateLimitPolicy = { algorithm: 'gcra', limit: 10, window: '1s', by };
    const first = cache.get(reused);
    expect(cache.get(reused)).toBe(first);
    expect(first.policy).toBe(reused);
    expect(cache.get({ algorithm: 'gcra', limit: 10, window: '1s', by })).not.toBe(first);
    cache.get({ algorithm: 'gcra', limit: () => 10, window: '1s' });
    cache.get({ algorithm: 'gcra', limit: 10, window: '1s', skipIf });
    expect(compiledFrom).toHaveLength(4);
    for (const policy of [
      reused,
      { algorithm: 'gcra', limit: 10, window: () => '1s' },
      { algorithm: 'gcra', limit: 10, window: '1s', skipIf },
    ]) {
      expect(contentKey(policy as RateLimitPolicy)).toBeUndefined();
    }
  });

  it('never remembers a policy that does not compile, and reports an unknown field as compiling does', () => {
    const { cache, compiledFrom } = counting();
    const unknown = { algorithm: 'gcra', limit: 10, window: '1s', limt: 5 } as unknown as RateLimitPolicy;
    const invalid: RateLimitPolicy = { algorithm: 'gcra', limit: 0, window: '1s' };
    for (let i = 0; i < 3; i++) {
      expect(() => cache.get(unknown)).toThrow(RateLimitConfigError);
      expect(() => cache.get(unknown)).toThrow("test: unknown policy field 'limt'; known fields are");
      expect(() => cache.get({ ...invalid })).toThrow('test: limit: 0 must be a whole number ≥ 1.');
    }
    expect(compiledFrom).toHaveLength(9);
    // The unknown field reached the compiler in the copy, so its message names it.
    expect(compiledFrom[0]).toEqual(unknown);
  });

  it('keeps no more than maxContentEntries policies by content, forgetting the least recently used first', () => {
    const { cache, compiledFrom } = counting(2);
    const policy = (limit: number): RateLimitPolicy => ({ algorithm: 'fixed-window', limit, window: '1m' });
    const one = cache.get(policy(1));
    cache.get(policy(2));
    expect(cache.get(policy(1))).toBe(one); // 1 is now more recent than 2
    cache.get(policy(3)); // forgets 2
    expect(cache.get(policy(1))).toBe(one);
    cache.get(policy(2));
    expect(compiledFrom.map((p) => p.limit)).toEqual([1, 2, 3, 2]);
  });

  it('compiles a policy whose content key would exceed 512 characters on every call instead of holding it', () => {
    const { cache, compiledFrom } = counting();
    const window = `${'0'.repeat(600)}1s`;
    const policy = (): RateLimitPolicy => ({ algorithm: 'fixed-window', limit: 1, window: window as RateLimitPolicy['window'] });
    expect(contentKey(policy())).toBeUndefined();
    const compiled: CompiledPolicy[] = [cache.get(policy()), cache.get(policy())];
    expect(compiled[0]).not.toBe(compiled[1]);
    expect(compiled[0].staticParams?.windowMs).toBe(1_000);
    expect(compiledFrom).toHaveLength(2);
  });

  it('leaves -0, null, object values and objects that are not plain to the identity side', () => {
    expect(contentKey({ algorithm: 'gcra', limit: 1, window: 1, cost: -0 })).toBeUndefined();
    expect(contentKey({ algorithm: 'gcra', limit: 1, window: 1, name: null } as unknown as RateLimitPolicy)).toBeUndefined();
    expect(contentKey({ algorithm: 'fixed-window', limit: 1, window: { calendar: 'day' } })).toBeUndefined();
    class Tier {
      readonly algorithm = 'gcra';
      readonly limit = 1;
      readonly window = 1;
    }
    expect(contentKey(new Tier() as RateLimitPolicy)).toBeUndefined();
    expect(contentKey({ algorithm: 'gcra', limit: 1, window: '1s', delay: false, cost: 0 })).toBe(
      '9:algorithms4:gcra5:limitn1;6:windows2:1s5:delayf4:costn0;',
    );
  });
});

describe('RateLimiterService with inline policies', () => {
  it('counts inline objects with equal fields as one policy, and sees a changed limit on a reused object', async () => {
    const h = memoryHarness();
    for (let i = 1; i <= 3; i++) {
      expect((await h.limiter.consume({ algorithm: 'fixed-window', limit: 3, window: '1m' }, 'u')).remaining).toBe(3 - i);
    }
    expect((await h.limiter.consume({ window: '1m', algorithm: 'fixed-window', limit: 3 }, 'u')).allowed).toBe(false);
    const reused: RateLimitPolicy = { algorithm: 'fixed-window', limit: 3, window: '1m' };
    expect((await h.limiter.peek(reused, 'u')).remaining).toBe(0);
    reused.limit = 5;
    // Same counter (same name and scope), new limit: two of five units left.
    expect((await h.limiter.consume(reused, 'u')).remaining).toBe(1);
  });
});
