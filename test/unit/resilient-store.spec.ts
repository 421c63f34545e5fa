/**
 * ResilientStore against a hand-written fake store (slow, hanging or failing on demand): the per-decision
 * deadline, the single shared timer, the three fallbacks, the short circuit after a failure, and the
 * rate-limited log line.
 */
import { Logger } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitStoreError } from '../../lib/errors/rate-limit-store.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine, type PolicyRequest } from '../../lib/pipeline/rate-limit.engine';
import { ResilientStore, type ResilientStoreOptions } from '../../lib/pipeline/resilient.store';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision, StoreFallback } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';

type Behaviour = 'ok' | 'hang' | 'fail' | 'slow';

/** A store that answers, never answers, fails at once, or answers after `slowMs`, as told. */
class FakeStore implements RateLimitStore {
  behaviour: Behaviour = 'ok';
  slowMs = 0;
  decides = 0;
  refunds = 0;
  closed = false;

  decide(calls: readonly RateLimitCall[], _mode: DecisionMode): Promise<StoreDecision> {
    this.decides++;
    return this.answer<StoreDecision>(() => ({
      nowMs: 0,
      allowed: true,
      verdicts: calls.map((c) => ({
        allowed: true,
        remaining: c.params.limit - c.cost,
        resetMs: 1_000,
        retryAfterMs: 0,
        delayMs: 0,
        moreQuotaMs: 1_000,
        reason: Verdict.Allowed,
      })),
    }));
  }
  refund(): Promise<void> {
    this.refunds++;
    return this.answer(() => undefined);
  }
  block(): Promise<void> {
    return this.answer(() => undefined);
  }
  delete(): Promise<void> {
    return this.answer(() => undefined);
  }
  async close(): Promise<void> {
    this.closed = true;
  }

  private answer<T>(value: () => T): Promise<T> {
    switch (this.behaviour) {
      case 'hang':
        return new Promise<T>(() => undefined);
      case 'fail':
        return Promise.reject(new Error('ECONNREFUSED (fake)'));
      case 'slow':
        return new Promise<T>((resolve) => setTimeout(() => resolve(value()), this.slowMs));
      default:
        return Promise.resolve(value());
    }
  }
}

const registry = new RateLimitAlgorithmRegistry();
const TIMEOUT = 100;

function resilient(fake: FakeStore, options: Partial<ResilientStoreOptions> = {}): ResilientStore {
  return new ResilientStore(fake, { timeoutMs: TIMEOUT, insuranceShare: 1, logIntervalMs: 10_000, retryAfterFailureMs: 250, ...options });
}

function request(policy: RateLimitPolicy): PolicyRequest {
  const compiled = compilePolicy(policy, registry, 'test', 'svc');
  return { compiled, params: compiled.staticParams!, cost: 1 };
}

function engineOver(store: RateLimitStore, onStoreError: StoreFallback = 'fail-open'): RateLimitEngine {
  return new RateLimitEngine(store, { onStoreError });
}

const policy = (extra: Partial<RateLimitPolicy> = {}): RateLimitPolicy => ({
  algorithm: 'fixed-window',
  limit: 10,
  window: '1h',
  ...extra,
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let warn: jest.SpyInstance;
beforeEach(() => {
  warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
});
afterEach(() => {
  jest.restoreAllMocks();
});

describe('deadline', () => {
  it('a store that never answers: the decision falls back within storeTimeoutMs (+ one tick)', async () => {
    const fake = new FakeStore();
    fake.behaviour = 'hang';
    const store = resilient(fake);
    const engine = engineOver(store);
    const started = performance.now();
    const result = await engine.decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    const elapsed = performance.now() - started;
    expect(result.decisions[0]).toMatchObject({ allowed: true, reason: 'store-unavailable' });
    expect(fake.decides).toBe(1);
    // Never early; how late depends on how busy this machine is (its stalls are not the store's time).
    expect(elapsed).toBeGreaterThanOrEqual(TIMEOUT - 1);
    await store.close();
  });

  it('operator calls (block, delete) reject with RateLimitStoreError at the deadline', async () => {
    const fake = new FakeStore();
    fake.behaviour = 'hang';
    const store = resilient(fake);
    const [call] = engineOver(store).calls(trackerKeyPrefix('rl', 'u'), [request(policy())]);
    await expect(store.block([call], 1_000)).rejects.toBeInstanceOf(RateLimitStoreError);
    await expect(store.delete([call.stateKey])).rejects.toThrow(/did not answer within storeTimeoutMs \(100 ms\)/);
    await store.close();
  });

  it('a slow answer inside the deadline is used as is', async () => {
    const fake = new FakeStore();
    fake.behaviour = 'slow';
    fake.slowMs = 20;
    const store = resilient(fake);
    const result = await engineOver(store, 'fail-closed').decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    expect(result.decisions[0]).toEqual({
      allowed: true,
      policy: 'default',
      limit: 10,
      remaining: 9,
      resetMs: 1_000,
      moreQuotaMs: 1_000,
      retryAfterMs: 0,
    });
    await store.close();
  });

  it('uses one shared timer for any number of pending decisions, and none once they settle', async () => {
    const created: unknown[] = [];
    const cleared: unknown[] = [];
    const realSetInterval = global.setInterval;
    const realClearInterval = global.clearInterval;
    jest.spyOn(global, 'setInterval').mockImplementation(((fn: () => void, ms?: number) => {
      const handle = realSetInterval(fn, ms);
      created.push(handle);
      return handle;
    }) as typeof setInterval);
    jest.spyOn(global, 'clearInterval').mockImplementation(((handle?: NodeJS.Timeout) => {
      if (handle !== undefined) cleared.push(handle);
      realClearInterval(handle);
    }) as typeof clearInterval);

    const fake = new FakeStore();
    fake.behaviour = 'hang';
    const store = resilient(fake, { retryAfterFailureMs: 0 });
    const engine = engineOver(store);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => engine.decide(trackerKeyPrefix('rl', `u${i}`), [request(policy())], 'consume')),
    );
    expect(results.every((r) => r.decisions[0].reason === 'store-unavailable')).toBe(true);
    expect(fake.decides).toBe(200);
    expect(created).toHaveLength(1);
    // The timer never holds the process open, and is cleared once nothing is pending.
    expect((created[0] as NodeJS.Timeout).hasRef()).toBe(false);
    expect(cleared).toEqual([created[0]]);

    // Fast answers: the timer is started for them and gone within a tick after they settle.
    fake.behaviour = 'ok';
    await Promise.all(Array.from({ length: 50 }, () => engine.decide(trackerKeyPrefix('rl', 'v'), [request(policy())], 'consume')));
    expect(created).toHaveLength(2);
    await sleep(50);
    // Every interval the store started is cleared (counting the process's active timers instead is flaky:
    // other tests' timers come and go meanwhile).
    expect(cleared).toEqual(created);
    expect((store as unknown as { ticker: unknown }).ticker).toBeUndefined();
    await store.close();
  });

  it('close() fails pending decisions (they fall back) and closes the primary', async () => {
    const fake = new FakeStore();
    fake.behaviour = 'hang';
    const store = resilient(fake, { timeoutMs: 60_000 });
    const pending = engineOver(store, 'fail-closed').decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    await sleep(5);
    await store.close();
    expect((await pending).decisions[0]).toMatchObject({ allowed: false, reason: 'store-unavailable' });
    expect(fake.closed).toBe(true);
  });
});

describe('fallbacks', () => {
  const failing = (options: Partial<ResilientStoreOptions> = {}) => {
    const fake = new FakeStore();
    fake.behaviour = 'fail';
    return { fake, store: resilient(fake, { retryAfterFailureMs: 0, ...options }) };
  };

  it('fail-open allows with the full limit, reason store-unavailable', async () => {
    const { store } = failing();
    const d = await engineOver(store, 'fail-open').decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    expect(d.allowed).toBe(true);
    expect(d.decisions[0]).toEqual({
      allowed: true,
      policy: 'default',
      limit: 10,
      remaining: 10,
      resetMs: 0,
      moreQuotaMs: 0,
      retryAfterMs: 0,
      reason: 'store-unavailable',
    });
  });

  it('fail-closed rejects, reason store-unavailable, retry after 1 s', async () => {
    const { store } = failing();
    const d = await engineOver(store, 'fail-closed').decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    expect(d.allowed).toBe(false);
    expect(d.decisions[0]).toEqual({
      allowed: false,
      policy: 'default',
      limit: 10,
      remaining: 0,
      resetMs: 0,
      moreQuotaMs: 1_000,
      retryAfterMs: 1_000,
      reason: 'store-unavailable',
    });
  });

  it('insurance grants exactly the local share of the limit (0.5 of 10 → 5), per tracker', async () => {
    const { store } = failing({ insuranceShare: 0.5 });
    const engine = engineOver(store, 'insurance');
    const run = async (tracker: string) => {
      const out = [];
      for (let i = 0; i < 12; i++)
        out.push((await engine.decide(trackerKeyPrefix('rl', tracker), [request(policy())], 'consume')).decisions[0]);
      return out;
    };
    const a = await run('a');
    expect(a.map((d) => d.allowed)).toEqual([...Array(5).fill(true), ...Array(7).fill(false)]);
    expect(a.slice(0, 5).map((d) => d.remaining)).toEqual([4, 3, 2, 1, 0]);
    expect(a.every((d) => d.reason === 'store-unavailable')).toBe(true);
    expect((await run('b')).filter((d) => d.allowed)).toHaveLength(5);
  });

  describe('without insuranceShare: 1 / the instances the overrides poll counted', () => {
    /** A fake whose overrides read says `live` instances polled lately, then fails as a store that went away. */
    const fleetOf = async (live: number | undefined, options: Partial<ResilientStoreOptions> = {}) => {
      const fake = new FakeStore() as FakeStore & Pick<RateLimitStore, 'readOverrides'>;
      fake.readOverrides = async () => ({ version: '0', nowMs: 0, ...(live === undefined ? {} : { liveInstances: live }) });
      const store = resilient(fake, { retryAfterFailureMs: 0, insuranceShare: undefined, ...options });
      const keys = { overrides: 'o', version: 'v', expiries: 'u', instances: 'i' };
      expect((await store.readOverrides(keys, undefined, { id: 'me', liveMs: 60_000 })).liveInstances).toBe(live);
      fake.behaviour = 'fail';
      return store;
    };
    const admitted = async (store: RateLimitStore, limit: number) => {
      const engine = engineOver(store, 'insurance');
      let allowed = 0;
      for (let i = 0; i < limit + 5; i++) {
        if ((await engine.decide(trackerKeyPrefix('rl', `u-${limit}`), [request(policy({ limit }))], 'consume')).allowed) allowed++;
      }
      return allowed;
    };

    it('3 instances live: 30 → 10 here, 31 → 10 (rounded down), 2 → 1 (never below 1)', async () => {
      const store = await fleetOf(3);
      expect([await admitted(store, 30), await admitted(store, 31), await admitted(store, 2)]).toEqual([10, 10, 1]);
    });

    it('no count yet (no read answered, or a store that counts nothing): the whole limit', async () => {
      expect(await admitted(await fleetOf(undefined), 30)).toBe(30);
    });

    it('an explicit insuranceShare wins over the count', async () => {
      expect(await admitted(await fleetOf(3, { insuranceShare: 1 }), 30)).toBe(30);
      expect(await admitted(await fleetOf(3, { insuranceShare: 0.5 }), 30)).toBe(15);
    });

    it('describes an outage for the overrides poller: the store named, and what insurance grants meanwhile', async () => {
      const store = await fleetOf(4, { name: 'Redis at 10.0.0.5:6379' });
      expect(store.describeOutage(new Error('Connection is closed.'))).toEqual({
        what: 'Redis at 10.0.0.5:6379 is unavailable: Connection is closed',
        meanwhile:
          "each policy's onStoreError decides until Redis answers again (with 'insurance', the default, this instance grants 1/4 of each limit: 4 instances polled Redis in the last minute)",
      });
      const alone = await fleetOf(1, { name: 'Redis at 10.0.0.5:6379' });
      expect(alone.describeOutage(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toEqual({
        what: `Redis at 10.0.0.5:6379 is unavailable: no connection (ioredis: "Stream isn't writeable and enableOfflineQueue options is false")`,
        meanwhile:
          "each policy's onStoreError decides until Redis answers again (with 'insurance', the default, this instance grants all of each limit: no other instance polled Redis in the last minute)",
      });
      const set = await fleetOf(4, { name: 'Redis at 10.0.0.5:6379', insuranceShare: 0.25 });
      expect(set.describeOutage(new Error('x'))?.meanwhile).toBe(
        "each policy's onStoreError decides until Redis answers again (with 'insurance', the default, this instance grants 25% of each limit (insuranceShare))",
      );
      // A decision's own failure is no outage: nothing to describe.
      expect(store.describeOutage(new RateLimitStoreError('WRONGTYPE', { outage: false }))).toBeUndefined();
    });
  });

  it('insurance share never drops below 1, and applies to burst too', async () => {
    const { store } = failing({ insuranceShare: 0.01 });
    const engine = engineOver(store, 'insurance');
    const req = request({ algorithm: 'token-bucket', limit: 10, burst: 50, window: '1h' });
    const out = [];
    for (let i = 0; i < 3; i++) out.push((await engine.decide(trackerKeyPrefix('rl', 'u'), [req], 'consume')).decisions[0].allowed);
    expect(out).toEqual([true, false, false]);
  });

  it('a policy overrides the module mode, and fail-closed stops insurance from charging the other policies', async () => {
    const { store } = failing({ insuranceShare: 0.5 });
    const engine = engineOver(store, 'fail-open');
    const tracker = trackerKeyPrefix('rl', 'u');
    const insured = request(policy({ name: 'insured', onStoreError: 'insurance' }));
    const closed = request(policy({ name: 'closed', onStoreError: 'fail-closed' }));
    const open = request(policy({ name: 'open' }));
    const mixed = await engine.decide(tracker, [open, insured, closed], 'consume');
    expect(mixed.allowed).toBe(false);
    expect(mixed.decisions.map((d) => [d.policy, d.allowed, d.reason])).toEqual([
      ['open', true, 'store-unavailable'],
      ['insured', true, 'store-unavailable'],
      ['closed', false, 'store-unavailable'],
    ]);
    // Nothing was charged to the insurance store by the rejected request: the full share is still there.
    const alone = [];
    for (let i = 0; i < 6; i++) alone.push((await engine.decide(tracker, [insured], 'consume')).decisions[0].allowed);
    expect(alone).toEqual([true, true, true, true, true, false]);
  });

  it('refunds never fail a request, and give insurance units back to the insurance store only', async () => {
    const { fake, store } = failing({ insuranceShare: 0.5 });
    const engine = engineOver(store, 'insurance');
    const tracker = trackerKeyPrefix('rl', 'u');
    const req = request(policy());
    let last;
    for (let i = 0; i < 5; i++) last = await engine.decide(tracker, [req], 'consume');
    expect((await engine.decide(tracker, [req], 'consume')).allowed).toBe(false);
    await expect(engine.refund(last!.calls)).resolves.toBeUndefined();
    // The store never charged what insurance decided, so nothing is refunded to it.
    expect(fake.refunds).toBe(0);
    expect((await engine.decide(tracker, [req], 'consume')).allowed).toBe(true);
  });
});

describe('circuit', () => {
  it('after a failure, decisions within 250 ms skip the store; the next one after that reaches it (recovery)', async () => {
    let now = 1_000_000;
    const fake = new FakeStore();
    const store = resilient(fake, { clock: () => now });
    const engine = engineOver(store, 'fail-closed');
    const decide = async () => (await engine.decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume')).decisions[0];

    expect(await decide()).toMatchObject({ allowed: true, remaining: 9 });
    expect(fake.decides).toBe(1);

    fake.behaviour = 'fail';
    expect(await decide()).toMatchObject({ allowed: false, reason: 'store-unavailable' });
    expect(fake.decides).toBe(2);

    fake.behaviour = 'ok';
    for (const t of [1, 100, 249]) {
      now = 1_000_000 + t;
      expect(await decide()).toMatchObject({ allowed: false, reason: 'store-unavailable' });
    }
    expect(fake.decides).toBe(2);

    now = 1_000_000 + 250;
    expect(await decide()).toEqual({
      allowed: true,
      policy: 'default',
      limit: 10,
      remaining: 9,
      resetMs: 1_000,
      moreQuotaMs: 1_000,
      retryAfterMs: 0,
    });
    expect(fake.decides).toBe(3);
    now += 1;
    await decide();
    expect(fake.decides).toBe(4);
  });

  it('while open, the fallback answers synchronously (no promise); closed, decideSync defers to decide', async () => {
    let now = 1_000_000;
    const fake = new FakeStore();
    const store = resilient(fake, { clock: () => now });
    const calls = engineOver(store).calls(trackerKeyPrefix('rl', 'u'), [request(policy({ onStoreError: 'fail-closed' }))]);
    expect(store.decideSync(calls, 'consume')).toBeUndefined();
    fake.behaviour = 'fail';
    await store.decide(calls, 'consume');
    expect(store.decideSync(calls, 'consume')).toMatchObject({
      allowed: false,
      verdicts: [{ allowed: false, reason: Verdict.StoreUnavailable }],
    });
    now += 250;
    expect(store.decideSync(calls, 'consume')).toBeUndefined();
    expect(fake.decides).toBe(1);
  });

  it('a missed deadline opens the circuit as well', async () => {
    const fake = new FakeStore();
    fake.behaviour = 'hang';
    const store = resilient(fake);
    const engine = engineOver(store);
    await engine.decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    fake.behaviour = 'ok';
    const d = await engine.decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    expect(d.decisions[0].reason).toBe('store-unavailable');
    expect(fake.decides).toBe(1);
    await store.close();
  });
});

describe('logging and hook', () => {
  it('logs one line for 100 failures within the interval, then one summarising line after it; the hook sees every failure', async () => {
    let now = 5_000_000;
    const fake = new FakeStore();
    fake.behaviour = 'fail';
    const errors: Error[] = [];
    const store = resilient(fake, { clock: () => now, logIntervalMs: 60_000, onError: (e) => errors.push(e) });
    const engine = engineOver(store);
    for (let i = 0; i < 100; i++) {
      await engine.decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
      now += 251; // past the circuit, so every decision reaches the failing store
    }
    expect(fake.decides).toBe(100);
    expect(errors).toHaveLength(100);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0][0])).toContain('Rate-limit store unavailable: ECONNREFUSED (fake)');

    now += 60_000;
    await engine.decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    expect(warn).toHaveBeenCalledTimes(2);
    expect(String(warn.mock.calls[1][0])).toContain('(99 more failures since the last report)');
  });
});

/** A store whose every decision waits until the test answers or fails it, in any order. */
class ManualStore implements RateLimitStore {
  readonly asked: Array<{ answer(): void; fail(error: Error): void }> = [];

  decide(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    return new Promise<StoreDecision>((resolve, reject) => {
      const verdicts = calls.map((c) => ({
        allowed: true,
        remaining: c.params.limit - c.cost,
        resetMs: 1_000,
        retryAfterMs: 0,
        delayMs: 0,
        moreQuotaMs: 1_000,
        reason: Verdict.Allowed,
      }));
      this.asked.push({ answer: () => resolve({ nowMs: 0, allowed: true, verdicts }), fail: reject });
    });
  }
  refund = async (): Promise<void> => undefined;
  block = async (): Promise<void> => undefined;
  delete = async (): Promise<void> => undefined;
  close = async (): Promise<void> => undefined;
}

/** A fail-closed engine over a {@link ManualStore}, deciding one policy for one tracker. */
function overManual(options: Partial<ResilientStoreOptions> = {}) {
  const manual = new ManualStore();
  const store = resilient(manual as unknown as FakeStore, options);
  const engine = engineOver(store, 'fail-closed');
  const decide = () => engine.decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
  return { manual, store, decide };
}

describe('a busy process is not a failing store', () => {
  it('an answer that arrives after a 600 ms stall of this process is the decision (the stall is not store time)', async () => {
    let now = 1_000_000;
    const manual = new ManualStore();
    const store = resilient(manual as unknown as FakeStore, { clock: () => now });
    const engine = engineOver(store, 'fail-closed');
    const pending = engine.decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    now += 600; // the loop was blocked: the next tick fires 600 ms after the last
    await sleep(40);
    manual.asked[0].answer();
    expect((await pending).decisions[0]).toMatchObject({ allowed: true, remaining: 9 });
    expect((await pending).decisions[0].reason).toBeUndefined();
    expect(store.timings().eventLoopDelayMs.max).toBeGreaterThanOrEqual(590);
    await store.close();
  });

  it('a call that misses its deadline while later calls are answered falls back alone: the circuit stays closed', async () => {
    const { manual, store, decide } = overManual();
    const debug = jest.spyOn(Logger.prototype, 'debug').mockImplementation(() => undefined);
    const slow = decide();
    await sleep(20);
    const quick = decide();
    manual.asked[1].answer();
    expect((await quick).allowed).toBe(true);
    expect((await slow).decisions[0]).toMatchObject({ allowed: false, reason: 'store-unavailable' });
    const next = decide();
    expect(manual.asked).toHaveLength(3);
    manual.asked[2].answer();
    expect((await next).allowed).toBe(true);
    expect(warn).not.toHaveBeenCalled();
    expect(debug).toHaveBeenCalledTimes(1);
    expect(String(debug.mock.calls[0][0])).toContain('a decision missed its deadline while later ones were answered');
    await store.close();
  });

  it("a decision's own failure (outage: false) falls back alone, is logged once per cause, and opens no circuit", async () => {
    const errors: Error[] = [];
    const { manual, store, decide } = overManual({ onError: (e) => errors.push(e) });
    for (let i = 0; i < 5; i++) {
      const pending = decide();
      manual.asked[i].fail(new RateLimitStoreError(`calendar window: the store's clock (${i}) is off`, { outage: false }));
      expect((await pending).decisions[0]).toMatchObject({ allowed: false, reason: 'store-unavailable' });
    }
    expect(manual.asked).toHaveLength(5);
    expect(errors).toHaveLength(5);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(String(warn.mock.calls[0][0])).toContain("a decision failed: calendar window: the store's clock (0) is off");
    await store.close();
  });

  it('an outage with no later answer opens the circuit', async () => {
    const { manual, store, decide } = overManual();
    const first = decide();
    manual.asked[0].fail(new Error('Connection is closed.'));
    expect((await first).decisions[0]).toMatchObject({ allowed: false, reason: 'store-unavailable' });
    expect((await decide()).decisions[0]).toMatchObject({ allowed: false, reason: 'store-unavailable' });
    expect(manual.asked).toHaveLength(1);
    await store.close();
  });
});

describe('the host clock stepping back', () => {
  afterEach(() => jest.restoreAllMocks());

  it('a 5 s backward step of Date.now during an outage leaves its 250 ms circuit window as it was', async () => {
    const fake = new FakeStore();
    const store = resilient(fake);
    const calls = engineOver(store).calls(trackerKeyPrefix('rl', 'u'), [request(policy({ onStoreError: 'fail-closed' }))]);
    fake.behaviour = 'fail';
    await store.decide(calls, 'consume');
    expect(store.decideSync(calls, 'consume')).toMatchObject({ allowed: false });
    const realNow = Date.now.bind(Date);
    jest.spyOn(Date, 'now').mockImplementation(() => realNow() - 5_000);
    fake.behaviour = 'ok';
    await sleep(300);
    expect(store.decideSync(calls, 'consume')).toBeUndefined();
    expect((await store.decide(calls, 'consume')).allowed).toBe(true);
    expect(fake.decides).toBe(2);
    await store.close();
  });

  it('a deadline fires though Date.now stands still 5 s in the past', async () => {
    const fake = new FakeStore();
    fake.behaviour = 'hang';
    const store = resilient(fake);
    const frozen = Date.now() - 5_000;
    jest.spyOn(Date, 'now').mockImplementation(() => frozen);
    const d = await engineOver(store, 'fail-closed').decide(trackerKeyPrefix('rl', 'u'), [request(policy())], 'consume');
    expect(d.decisions[0]).toMatchObject({ allowed: false, reason: 'store-unavailable' });
    await store.close();
  });
});
