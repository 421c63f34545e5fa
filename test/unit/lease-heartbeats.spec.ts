import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine, type PolicyRequest } from '../../lib/pipeline/rate-limit.engine';
import { LeaseHeartbeats } from '../../lib/routes/lease-heartbeats';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { ResilientStore } from '../../lib/pipeline/resilient.store';
import type { RateLimitCall, RateLimitStore } from '../../lib/stores/store.interface';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { T0 } from '../support/memory-harness';

/** One slot, a 300 ms lease: renewed every 100 ms while its work runs. */
const POLICY: RateLimitPolicy = { algorithm: 'concurrency', limit: 1, window: 300 };
const registry = new RateLimitAlgorithmRegistry();
const compiled = compilePolicy(POLICY, registry, 'test', 'route');
const request = (): PolicyRequest[] => [{ compiled, params: compiled.staticParams!, cost: 1 }];

/** The store's renewals so far: decisions of a negative cost (a lease's units). */
function renewalsOf(store: RateLimitStore): () => number {
  const decide = jest.spyOn(store, 'decide');
  return () => decide.mock.calls.filter(([calls]) => calls[0].cost < 0).length;
}

/** Lets the timers due within `ms` fire, and the renewals they send settle. */
const advance = (ms: number) => jest.advanceTimersByTimeAsync(ms);

describe('LeaseHeartbeats', () => {
  let store: MemoryStore;
  let engine: RateLimitEngine;
  let heartbeats: LeaseHeartbeats;
  beforeEach(() => {
    jest.useFakeTimers({ now: T0 });
    store = new MemoryStore({ clock: Date.now });
    engine = new RateLimitEngine(store);
    heartbeats = new LeaseHeartbeats(store);
  });
  afterEach(() => {
    heartbeats.close();
    jest.useRealTimers();
    jest.restoreAllMocks();
  });

  /** Takes the one slot; the calls that took it. */
  async function take(): Promise<RateLimitCall[]> {
    const { allowed, calls } = await engine.decide('rl:{t}:', request(), 'consume');
    expect(allowed).toBe(true);
    return calls;
  }
  const slotTaken = async () => !(await engine.decide('rl:{t}:', request(), 'peek')).allowed;

  it('keeps a lease held past its window while its work runs, renewing every third of the window; stops at once when told', async () => {
    const renewals = renewalsOf(store);
    const stop = heartbeats.keep(await take());
    const held: boolean[] = [];
    for (let t = 100; t <= 900; t += 100) {
      await advance(100);
      held.push(await slotTaken());
    }
    expect(held).toEqual(new Array(9).fill(true));
    expect(renewals()).toBe(9); // at 100, 200, … 900 ms
    stop();
    expect(heartbeats.size).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
    await advance(299);
    expect(await slotTaken()).toBe(true); // the last renewal (900 ms) holds it until 1,200 ms
    await advance(1);
    expect(await slotTaken()).toBe(false);
    await advance(1_000);
    expect(renewals()).toBe(9);
  });

  it('without it, the same lease expires after its window', async () => {
    await take();
    await advance(299);
    expect(await slotTaken()).toBe(true);
    await advance(1);
    expect(await slotTaken()).toBe(false);
  });

  it('stops renewing a lease the store no longer holds (released or expired), and its timer with it', async () => {
    const renewals = renewalsOf(store);
    const calls = await take();
    heartbeats.keep(calls);
    await advance(100);
    await engine.refund(calls);
    await advance(100);
    expect(renewals()).toBe(2);
    expect(heartbeats.size).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
    await advance(1_000);
    expect(renewals()).toBe(2);
    expect(await slotTaken()).toBe(false);
  });

  it('shares one timer between leases of different windows, each renewed at its own pace', async () => {
    const renewals = renewalsOf(store);
    const long = compilePolicy({ ...POLICY, window: 900, name: 'long' }, registry, 'test', 'route');
    const a = heartbeats.keep(await take());
    const { calls } = await engine.decide('rl:{u}:', [{ compiled: long, params: long.staticParams!, cost: 1 }], 'consume');
    const b = heartbeats.keep(calls);
    expect(jest.getTimerCount()).toBe(1);
    await advance(600);
    expect(renewals()).toBe(6 + 2); // every 100 ms, and every 300 ms
    a();
    expect(heartbeats.size).toBe(1);
    await advance(600);
    expect(renewals()).toBe(8 + 2);
    b();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('close() stops every renewal and the timer; a lease kept after it is not renewed', async () => {
    const renewals = renewalsOf(store);
    heartbeats.keep(await take());
    await advance(100);
    heartbeats.close();
    expect(jest.getTimerCount()).toBe(0);
    const { calls } = await engine.decide('rl:{v}:', request(), 'consume');
    const stop = heartbeats.keep(calls);
    expect(heartbeats.size).toBe(0);
    expect(jest.getTimerCount()).toBe(0);
    stop();
    await advance(1_000);
    expect(renewals()).toBe(1);
    expect(jest.getTimerCount()).toBe(0);
  });

  describe('when the store fails', () => {
    // A client that never connects, without an offline queue: every call fails at once.
    let client: Redis;
    beforeEach(() => {
      client = new Redis({ lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    });
    afterEach(() => client.disconnect());

    it('a renewal that rejects is logged at most once per 10 s and tried again a third of a window later; nothing throws', async () => {
      const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      const failing = new RedisStore(client, registry.all(), false);
      const renewals = renewalsOf(failing);
      const beats = new LeaseHeartbeats(failing);
      const stop = beats.keep(await take());
      await advance(1_000);
      // Every 100 ms from each failure's answer (which the client gives a tick later): 9 or 10 in a second.
      expect(renewals()).toBeGreaterThanOrEqual(9);
      expect(renewals()).toBeLessThanOrEqual(10);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0][0])).toMatch(/^could not renew a concurrency lease with the store \(it expires after its window/);
      expect(beats.size).toBe(1);
      stop();
      // Counted by renewals, not timers: the client's own reconnect timer (its first command connects it, to
      // nothing) is a fake timer too. A renewal already sent may still answer; none is sent after it.
      await advance(100);
      const sent = renewals();
      await advance(1_000);
      expect(renewals()).toBe(sent);
      expect(beats.size).toBe(0);
    });

    it('a renewal the fallback answered (the store is down) says nothing about the lease: renewals go on', async () => {
      jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      const resilient = new ResilientStore(new RedisStore(client, registry.all(), false), {
        timeoutMs: 50,
        insuranceShare: 1,
        logIntervalMs: 10_000,
        retryAfterFailureMs: 250,
      });
      const renewals = renewalsOf(resilient);
      const beats = new LeaseHeartbeats(resilient);
      const stop = beats.keep(await take());
      await advance(1_000);
      expect(renewals()).toBeGreaterThanOrEqual(9);
      expect(renewals()).toBeLessThanOrEqual(10);
      expect(beats.size).toBe(1);
      stop();
      expect(beats.size).toBe(0);
      await resilient.close();
    });
  });
});
