/** SlicingStore's rules that need no Redis: validation, one grant in flight per key, fallbacks, bounds. */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { ResilientStore } from '../../lib/pipeline/resilient.store';
import { SlicingStore } from '../../lib/pipeline/slicing.store';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';

const registry = new RateLimitAlgorithmRegistry();

function callsFor(policy: RateLimitPolicy, tracker = 'global'): RateLimitCall[] {
  const compiled = compilePolicy(policy, registry, 'test', 'svc');
  return new RateLimitEngine(new MemoryStore()).calls(trackerKeyPrefix('rl', tracker), [
    { compiled, params: compiled.staticParams!, cost: 1 },
  ]);
}

/** A memory store that answers only with a promise, counts what it is asked, and can answer as a fallback would (`Verdict.StoreUnavailable`). */
class CountingStore implements RateLimitStore {
  private readonly memory = new MemoryStore();
  decides: Array<{ costs: number[]; mode: DecisionMode }> = [];
  refunds: number[] = [];
  fallback = false;
  async decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    this.decides.push({ costs: calls.map((c) => c.cost), mode });
    await new Promise((r) => setImmediate(r));
    if (!this.fallback) return this.memory.decide(calls, mode);
    const verdicts = calls.map(() => ({
      allowed: true,
      remaining: 0,
      resetMs: 0,
      retryAfterMs: 0,
      delayMs: 0,
      moreQuotaMs: 0,
      reason: Verdict.StoreUnavailable,
    }));
    return { nowMs: Date.now(), allowed: true, verdicts };
  }
  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    this.refunds.push(...calls.map((c) => c.cost));
    return this.memory.refund(calls);
  }
  block = (calls: readonly RateLimitCall[], ms: number) => this.memory.block(calls, ms);
  delete = (keys: readonly string[]) => this.memory.delete(keys);
  close = () => this.memory.close();
}

const hot: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1_000, window: '1s', slice: 10 };

describe('slice is checked at bootstrap', () => {
  const compile = (policy: Partial<RateLimitPolicy>) => () =>
    compilePolicy(
      { algorithm: 'fixed-window', limit: 100, window: '1m', ...policy } as RateLimitPolicy,
      registry,
      '@RateLimit on C.h',
      'r=C.h',
    );

  it.each<[Partial<RateLimitPolicy>, string]>([
    [{ slice: 0 }, 'slice: 0 must be a whole number ≥ 1.'],
    [{ slice: 2.5 }, 'slice: 2.5 must be a whole number ≥ 1.'],
    [
      { algorithm: 'concurrency', slice: 5 },
      "slice: 'concurrency' cannot be sliced (a lease is per request); slices work with 'fixed-window', 'sliding-window', 'token-bucket', 'gcra'.",
    ],
    [
      { algorithm: 'leaky-bucket', slice: 5 },
      "slice: 'leaky-bucket' cannot be sliced (each request gets its own delay); slices work with 'fixed-window', 'sliding-window', 'token-bucket', 'gcra'.",
    ],
    [
      { algorithm: 'sliding-log', slice: 5 },
      "slice: 'sliding-log' cannot be sliced (each request is logged at its own time); slices work with 'fixed-window', 'sliding-window', 'token-bucket', 'gcra'.",
    ],
    [
      { slice: 5, blockFor: '1m' },
      'slice: cannot be combined with blockFor: a slice is spent in-process without asking the store, so a lockout set by another instance would go unseen.',
    ],
    [
      { slice: 5, countOnly: 'failed' },
      'slice: cannot be combined with countOnly: a slice is spent in-process without asking the store, so its units cannot be given back one request at a time.',
    ],
    [
      { slice: 101 },
      "slice: 101 is more than the policy's capacity (100), so no slice would ever fit; take a small share of it (limit / 100 / instances keeps the overshoot within 1 %).",
    ],
    [
      { algorithm: 'gcra', burst: 20, slice: 21 },
      "slice: 21 is more than the policy's capacity (20), so no slice would ever fit; take a small share of it (limit / 100 / instances keeps the overshoot within 1 %).",
    ],
  ])('%p fails, naming the field', (policy, message) => {
    expect(compile(policy)).toThrow(new RateLimitConfigError(`@RateLimit on C.h: ${message}`));
  });

  it('takes a slice up to the capacity on fixed-window, sliding-window, token-bucket and gcra', () => {
    for (const algorithm of ['fixed-window', 'sliding-window', 'token-bucket', 'gcra'] as const) {
      expect(compile({ algorithm, slice: 100 })).not.toThrow();
    }
    expect(compile({ limit: () => 5, slice: 50 })).not.toThrow();
  });
});

describe('SlicingStore', () => {
  it('64 callers at once with an empty slice make one grant, and wait for it rather than take slices of their own', async () => {
    const inner = new CountingStore();
    const store = new SlicingStore(inner);
    const calls = callsFor(hot);
    const decisions = await Promise.all(Array.from({ length: 64 }, () => store.decide(calls, 'consume')));
    expect(decisions.every((d) => d.allowed)).toBe(true);
    // 64 units in slices of 10: 7 grants, one at a time.
    expect(inner.decides.map((d) => d.costs)).toEqual(Array.from({ length: 7 }, () => [10]));
    await store.close();
    expect(inner.refunds).toEqual([6]);
  });

  it("never makes a slice of a fallback's answer: the fallback decides the request at its own cost", async () => {
    const inner = new CountingStore();
    inner.fallback = true;
    const store = new SlicingStore(inner);
    const calls = callsFor(hot);
    for (let i = 0; i < 2; i++) expect((await store.decide(calls, 'consume')).verdicts[0].reason).toBe(Verdict.StoreUnavailable);
    // Each request: the grant the store could not make, then the request itself.
    expect(inner.decides.map((d) => d.costs)).toEqual([[10], [1], [10], [1]]);
    await store.close();
    expect(inner.refunds).toEqual([10, 10]);
  });

  it("while Redis is unavailable, insurance decides each request at its own cost, not a slice's", async () => {
    const hanging: RateLimitStore = {
      decide: () => new Promise<StoreDecision>(() => undefined),
      refund: async () => undefined,
      block: async () => undefined,
      delete: async () => undefined,
      close: async () => undefined,
    };
    const resilient = new ResilientStore(hanging, { timeoutMs: 20, insuranceShare: 0.5, logIntervalMs: 60_000, retryAfterFailureMs: 250 });
    const store = new SlicingStore(resilient);
    // limit 20, slices of 10: insurance holds half, 10, which one slice charged to it would use up at once.
    const calls = callsFor({ algorithm: 'fixed-window', limit: 20, window: '1h', slice: 10, onStoreError: 'insurance' });
    const answers: boolean[] = [];
    for (let i = 0; i < 11; i++) {
      const decision = store.decideSync(calls, 'consume') ?? (await store.decide(calls, 'consume'));
      expect(decision.verdicts[0].reason).toBe(Verdict.StoreUnavailable);
      answers.push(decision.allowed);
    }
    expect(answers).toEqual([...Array<boolean>(10).fill(true), false]);
    await store.close();
  });

  it("answers from a slice synchronously, and counts the store's times down", async () => {
    let now = 1_000;
    const inner = new CountingStore();
    const store = new SlicingStore(inner, () => now);
    const calls = callsFor({ algorithm: 'fixed-window', limit: 100, window: '1h', slice: 10 });
    expect(store.decideSync(calls, 'consume')).toBeUndefined();
    const granted = await store.decide(calls, 'consume');
    expect(granted.verdicts[0]).toMatchObject({ allowed: true, remaining: 99 });
    now += 200;
    const spent = store.decideSync(calls, 'consume')!;
    expect(spent.verdicts[0]).toMatchObject({ allowed: true, remaining: 98, resetMs: granted.verdicts[0].resetMs - 200 });
    expect(spent.nowMs).toBe(granted.nowMs + 200);
    await store.close();
  });

  it('holds slices for at most 10,000 keys: the least recently used gives its slice back', async () => {
    const inner = new CountingStore();
    // A clock that stands still: slices that outlive their lifetime would be given back too on a slow machine.
    const store = new SlicingStore(inner, () => 0);
    for (let i = 0; i < 10_001; i++) await store.decide(callsFor(hot, `t${i}`), 'consume');
    expect(inner.refunds).toEqual([9]);
    await store.close();
    expect(inner.refunds).toHaveLength(10_001);
  });
});
