/** SheddingStore's synchronous answer: a remembered rejection needs no promise, anything else is the store's. */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { SheddingStore } from '../../lib/pipeline/shedding.store';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';
import { LocalLeases } from '../../lib/stores/memory/local-leases';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';

/** Rejects everything with a 1 s wait, and counts how often it was asked. */
class RejectingStore implements RateLimitStore {
  decides = 0;
  async decide(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    this.decides++;
    const verdicts = calls.map(() => ({
      allowed: false,
      remaining: 0,
      resetMs: 1_000,
      retryAfterMs: 1_000,
      delayMs: 0,
      moreQuotaMs: 1_000,
      reason: Verdict.Limited,
    }));
    return { nowMs: 0, allowed: false, verdicts };
  }
  async refund(): Promise<void> {}
  async block(): Promise<void> {}
  async delete(): Promise<void> {}
  async close(): Promise<void> {}
}

function callsFor(tracker: string): RateLimitCall[] {
  const compiled = compilePolicy({ algorithm: 'fixed-window', limit: 1, window: '1h' }, new RateLimitAlgorithmRegistry(), 'test', 'svc');
  return new RateLimitEngine(new RejectingStore()).calls(trackerKeyPrefix('rl', tracker), [
    { compiled, params: compiled.staticParams!, cost: 1 },
  ]);
}

describe('SheddingStore.decideSync', () => {
  it('answers a remembered rejection synchronously, counting its wait down, and leaves the rest to decide', async () => {
    let now = 5_000;
    const inner = new RejectingStore();
    const store = new SheddingStore(inner, 100, () => now);
    const abuser = callsFor('abuser');
    expect(store.decideSync(abuser, 'consume')).toBeUndefined();
    await store.decide(abuser, 'consume');
    now += 400;
    expect(store.decideSync(abuser, 'consume')).toMatchObject({ allowed: false, verdicts: [{ allowed: false, retryAfterMs: 600 }] });
    expect(store.decideSync(callsFor('someone-else'), 'consume')).toBeUndefined();
    now += 600;
    expect(store.decideSync(abuser, 'consume')).toBeUndefined();
    expect(inner.decides).toBe(1);
  });
});

describe('SheddingStore and concurrency leases', () => {
  const registry = new RateLimitAlgorithmRegistry();
  const compiled = compilePolicy({ algorithm: 'concurrency', limit: 2, window: '10s' }, registry, 'test', 'svc');
  const engine = new RateLimitEngine(new RejectingStore());
  const lease = (tracker: string, token: string) =>
    engine.calls(trackerKeyPrefix('rl', tracker), [{ compiled, params: compiled.staticParams!, cost: 1, token }]);

  /** One memory store shared by two instances, seen only through `decide` (so every answer is counted). */
  function setup() {
    const clock = { now: 10_000 };
    const shared = new MemoryStore({ clock: () => clock.now });
    const asked = { count: 0 };
    const inner: RateLimitStore = {
      decide: (calls, mode) => {
        asked.count++;
        return shared.decide(calls, mode);
      },
      refund: (calls) => shared.refund(calls),
      block: (calls, ms) => shared.block(calls, ms),
      delete: (keys) => shared.delete(keys),
      close: () => shared.close(),
    };
    return {
      clock,
      asked,
      here: new SheddingStore(inner, 100, () => clock.now),
      elsewhere: new SheddingStore(inner, 100, () => clock.now),
    };
  }

  it('sheds while leases taken here fill the key, until the soonest of them expires', async () => {
    const { clock, asked, here } = setup();
    expect((await here.decide(lease('t', 'a'), 'consume')).allowed).toBe(true);
    clock.now = 11_000;
    expect((await here.decide(lease('t', 'b'), 'consume')).allowed).toBe(true);
    clock.now = 12_000;
    expect((await here.decide(lease('t', 'c'), 'consume')).allowed).toBe(false);
    expect(asked.count).toBe(3);
    // Lease 'a' expires at 20 000: the rejection is certain until then, and counts down.
    clock.now = 19_000;
    expect(here.decideSync(lease('t', 'c'), 'consume')).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 1_000 }] });
    expect((await here.decide(lease('t', 'c'), 'consume')).allowed).toBe(false);
    expect(asked.count).toBe(3);
    clock.now = 20_000;
    expect(here.decideSync(lease('t', 'c'), 'consume')).toBeUndefined();
    expect((await here.decide(lease('t', 'c'), 'consume')).allowed).toBe(true);
    expect(asked.count).toBe(4);
  });

  it('forgets the rejection when a lease is released here', async () => {
    const { asked, here } = setup();
    await here.decide(lease('t', 'a'), 'consume');
    await here.decide(lease('t', 'b'), 'consume');
    expect((await here.decide(lease('t', 'c'), 'consume')).allowed).toBe(false);
    expect(here.decideSync(lease('t', 'c'), 'consume')).toMatchObject({ allowed: false });
    await here.refund(lease('t', 'b'));
    expect(here.decideSync(lease('t', 'c'), 'consume')).toBeUndefined();
    expect((await here.decide(lease('t', 'c'), 'consume')).allowed).toBe(true);
    expect(asked.count).toBe(4);
  });

  it('never sheds while another holder has a lease on the key (it may release it at any time)', async () => {
    const { asked, here, elsewhere } = setup();
    await here.decide(lease('t', 'a'), 'consume');
    await elsewhere.decide(lease('t', 'b'), 'consume');
    for (let i = 0; i < 3; i++) {
      expect((await here.decide(lease('t', 'c'), 'consume')).allowed).toBe(false);
      expect(here.decideSync(lease('t', 'c'), 'consume')).toBeUndefined();
    }
    expect(asked.count).toBe(5);
    await elsewhere.refund(lease('t', 'b'));
    expect((await here.decide(lease('t', 'c'), 'consume')).allowed).toBe(true);
  });

  it('counts no lease a fallback answered (the store was down: nothing is held there)', async () => {
    const verdict = (allowed: boolean, reason: Verdict) => ({
      allowed,
      remaining: 0,
      resetMs: 5_000,
      retryAfterMs: allowed ? 0 : 5_000,
      delayMs: 0,
      moreQuotaMs: 5_000,
      reason,
    });
    const answers = [
      verdict(true, Verdict.StoreUnavailable),
      verdict(true, Verdict.StoreUnavailable),
      verdict(false, Verdict.Limited),
      verdict(false, Verdict.Limited),
    ];
    let asked = 0;
    const inner: RateLimitStore = {
      decide: async () => {
        const v = answers[asked++];
        return { nowMs: 0, allowed: v.allowed, verdicts: [v] };
      },
      refund: async () => undefined,
      block: async () => undefined,
      delete: async () => undefined,
      close: async () => undefined,
    };
    const store = new SheddingStore(inner, 100, () => 10_000);
    await store.decide(lease('t', 'a'), 'consume');
    await store.decide(lease('t', 'b'), 'consume');
    expect((await store.decide(lease('t', 'c'), 'consume')).allowed).toBe(false);
    expect(store.decideSync(lease('t', 'c'), 'consume')).toBeUndefined();
    expect((await store.decide(lease('t', 'c'), 'consume')).allowed).toBe(false);
    expect(asked).toBe(4);
  });
});

describe('LocalLeases', () => {
  const registry = new RateLimitAlgorithmRegistry();
  const engine = new RateLimitEngine(new RejectingStore());
  const leaseOf = (limit: number) => {
    const compiled = compilePolicy({ algorithm: 'concurrency', limit, window: '10s' }, registry, 'test', 'svc');
    return (token: string) => engine.calls(trackerKeyPrefix('rl', 't'), [{ compiled, params: compiled.staticParams!, cost: 1, token }]);
  };
  const allowed: StoreDecision = {
    nowMs: 0,
    allowed: true,
    verdicts: [{ allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0, delayMs: 0, moreQuotaMs: 0, reason: Verdict.Allowed }],
  };

  it('holds about `limit` leases per key: leases never released are dropped once expired', () => {
    const leases = new LocalLeases(100);
    const lease = leaseOf(2);
    leases.took(lease('a'), allowed, 10_000);
    leases.took(lease('b'), allowed, 10_000);
    expect(leases.certainFor(lease('c')[0], 15_000)).toBe(5_000);
    // 'a' and 'b' expired at 20 000 without a release; the store let 'c' and 'd' in.
    leases.took(lease('c'), allowed, 21_000);
    leases.took(lease('d'), allowed, 21_000);
    expect(leases.size).toBe(2);
    expect(leases.certainFor(lease('e')[0], 22_000)).toBe(9_000);
  });

  it('does not track keys with a limit above 1,024 (they never shed on leases)', () => {
    const leases = new LocalLeases(100);
    const lease = leaseOf(5_000);
    for (let i = 0; i < 5_000; i++) leases.took(lease(`l${i}`), allowed, 10_000);
    expect(leases.size).toBe(0);
    expect(leases.certainFor(lease('one-more')[0], 10_000)).toBe(0);
  });
});

describe('SheddingStore: a remembered rejection answers only what it answers exactly', () => {
  const registry = new RateLimitAlgorithmRegistry();
  const engine = new RateLimitEngine(new RejectingStore());
  const compiled = (policy: Parameters<typeof compilePolicy>[0]) => compilePolicy(policy, registry, 'test', 'svc');
  // gcra, 2 per 2 s, burst 2: one unit comes back every second.
  const gcra = compiled({ algorithm: 'gcra', limit: 2, window: '2s', burst: 2, name: 'g' });
  const other = compiled({ algorithm: 'fixed-window', limit: 100, window: '1h', name: 'o' });
  const call = (policy: typeof gcra, cost: number) =>
    engine.calls(trackerKeyPrefix('rl', 't'), [{ compiled: policy, params: policy.staticParams!, cost }]);
  const both = (cost: number) =>
    engine.calls(trackerKeyPrefix('rl', 't'), [
      { compiled: gcra, params: gcra.staticParams!, cost },
      { compiled: other, params: other.staticParams!, cost: 1 },
    ]);

  /** A memory store seen only through `decide` (every answer it gives is counted) or, for `sync`, through `decideSync` too. */
  function setup(sync: boolean) {
    const clock = { now: 10_000 };
    const memory = new MemoryStore({ clock: () => clock.now });
    const asked = { count: 0 };
    const inner: RateLimitStore = {
      decide: (calls, mode) => {
        asked.count++;
        return memory.decide(calls, mode);
      },
      ...(sync
        ? {
            decideSync: (calls: readonly RateLimitCall[], mode: DecisionMode) => {
              asked.count++;
              return memory.decideSync(calls, mode);
            },
          }
        : {}),
      refund: (calls) => memory.refund(calls),
      block: (calls, ms) => memory.block(calls, ms),
      delete: (keys) => memory.delete(keys),
      close: () => memory.close(),
    };
    const store = new SheddingStore(inner, 100, () => clock.now);
    // As the engine asks: the synchronous answer when there is one.
    const consume = async (calls: readonly RateLimitCall[]) => store.decideSync(calls, 'consume') ?? (await store.decide(calls, 'consume'));
    return { clock, asked, store, consume };
  }

  it.each([
    ['decide', false],
    ['decideSync', true],
  ])('forgets it once this store admits another cost on its key (inner answers through %s)', async (_, sync) => {
    const { clock, asked, store, consume } = setup(sync);
    expect((await consume(call(gcra, 2))).allowed).toBe(true);
    expect(await store.decide(call(gcra, 2), 'consume')).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 2_000 }] });
    clock.now = 10_500;
    // Remembered: answered here, counted down.
    expect(await consume(call(gcra, 2))).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 1_500 }] });
    expect(asked.count).toBe(2);
    clock.now = 11_000;
    expect((await consume(call(gcra, 1))).allowed).toBe(true);
    // The admission moved the key's TAT to 13 000: two units are 2 s away, not 1 s.
    expect(await consume(call(gcra, 2))).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 2_000 }] });
    expect(asked.count).toBe(4);
    clock.now = 13_000;
    expect((await consume(call(gcra, 2))).allowed).toBe(true);
  });

  it('forgets a rejection of several policies once one of its keys admits alone', async () => {
    const { clock, asked, store, consume } = setup(false);
    expect((await consume(both(2))).allowed).toBe(true);
    expect(await store.decide(both(2), 'consume')).toMatchObject({
      allowed: false,
      verdicts: [{ retryAfterMs: 2_000 }, { allowed: true }],
    });
    clock.now = 11_000;
    expect(await consume(both(2))).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 1_000 }, { allowed: true }] });
    expect(asked.count).toBe(2);
    expect((await consume(call(gcra, 1))).allowed).toBe(true);
    expect(await consume(both(2))).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 2_000 }, { allowed: true }] });
    expect(asked.count).toBe(4);
  });

  it('forgets it when this store locks the key out (a lockout only lengthens the wait)', async () => {
    const { clock, asked, store, consume } = setup(false);
    await consume(call(gcra, 2));
    await consume(call(gcra, 1));
    expect(asked.count).toBe(2);
    clock.now = 10_400;
    expect(await consume(call(gcra, 1))).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 600 }] });
    expect(asked.count).toBe(2);
    await store.block(call(gcra, 1), 60_000);
    expect(await consume(call(gcra, 1))).toMatchObject({ allowed: false, verdicts: [{ reason: Verdict.Blocked, retryAfterMs: 60_000 }] });
    expect(asked.count).toBe(3);
  });

  it('forgets it when an admission in flight with it is answered after it (answers come in the order the store decided)', async () => {
    const { clock, store, consume } = setup(false);
    await consume(call(gcra, 2));
    clock.now = 11_000;
    // The rejection is decided first (one unit is back, two are not), then the admission of that one unit.
    const [rejected, admitted] = await Promise.all([store.decide(call(gcra, 2), 'consume'), store.decide(call(gcra, 1), 'consume')]);
    expect(rejected).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 1_000 }] });
    expect(admitted.allowed).toBe(true);
    expect(store.decideSync(call(gcra, 2), 'consume')).toBeUndefined();
    expect(await store.decide(call(gcra, 2), 'consume')).toMatchObject({ allowed: false, verdicts: [{ retryAfterMs: 2_000 }] });
  });

  it('forgets, when a refund is done, a rejection whose answer came in while it was under way', async () => {
    const answers: Array<(d: StoreDecision) => void> = [];
    const refunds: Array<() => void> = [];
    const inner: RateLimitStore = {
      decide: () => new Promise<StoreDecision>((resolve) => answers.push(resolve)),
      refund: () => new Promise<void>((resolve) => refunds.push(resolve)),
      block: async () => undefined,
      delete: async () => undefined,
      close: async () => undefined,
    };
    const store = new SheddingStore(inner, 100, () => 10_000);
    const calls = call(gcra, 2);
    const rejection = store.decide(calls, 'consume');
    const refund = store.refund(call(gcra, 1));
    // The store decided the rejection before the refund; its answer arrives while the refund is under way.
    answers[0]({
      nowMs: 10_000,
      allowed: false,
      verdicts: [
        { allowed: false, remaining: 0, resetMs: 2_000, retryAfterMs: 2_000, delayMs: 0, moreQuotaMs: 2_000, reason: Verdict.Limited },
      ],
    });
    await rejection;
    expect(store.decideSync(calls, 'consume')).toMatchObject({ allowed: false });
    refunds[0]();
    await refund;
    expect(store.decideSync(calls, 'consume')).toBeUndefined();
  });

  it('counts the wait down from when the answer arrived, in whole ms rounded up (a sub-ms clock)', async () => {
    const { clock, store, consume } = setup(false);
    await consume(call(gcra, 2));
    clock.now = 10_000.6;
    await store.decide(call(gcra, 2), 'consume');
    clock.now = 10_400.2;
    // 2 000 ms told at 10 000.6, read 399.6 ms later: 1 600.4 ms left, told as 1 601.
    expect(store.decideSync(call(gcra, 2), 'consume')).toMatchObject({ verdicts: [{ retryAfterMs: 1_601, resetMs: 1_601 }] });
    clock.now = 12_000.5;
    expect(store.decideSync(call(gcra, 2), 'consume')).toMatchObject({ verdicts: [{ retryAfterMs: 1 }] });
    clock.now = 12_000.6;
    expect(store.decideSync(call(gcra, 2), 'consume')).toBeUndefined();
  });
});
