/**
 * Bounds of the programmatic API, on the memory store and on a real Redis:
 *  - `refund(cost)` takes a whole number from 1 to the policy's capacity, and the `concurrency` refund in Lua
 *    releases at most the leases that exist (a huge cost once blocked Redis for seconds, BUSY at 1e7);
 *  - a lease's `extend()` keeps it held while its work is alive, and it expires once the extends stop.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { startRedis, type RedisProcess } from '../support/redis-server';

type StoreName = 'memory' | 'redis';

const registry = new RateLimitAlgorithmRegistry();
let redis: RedisProcess;
let admin: Redis;
let client: Redis;
const stores = new Map<StoreName, RateLimitStore>();
let trackers = 0;

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis({ port: redis.port });
  client = new Redis({ port: redis.port, enableAutoPipelining: true });
  stores.set('memory', new MemoryStore());
  stores.set('redis', new RedisStore(client, registry.all(), false));
  // Both connections up before anything is timed.
  await Promise.all([admin.ping(), client.ping()]);
}, 30_000);

afterAll(async () => {
  client?.disconnect();
  admin?.disconnect();
  await redis?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const tracker = () => `bounds-${process.pid}-${++trackers}`;

function setup(name: StoreName): { engine: RateLimitEngine; service: RateLimiterService } {
  const engine = new RateLimitEngine(stores.get(name)!);
  return { engine, service: new RateLimiterService(engine, registry, { prefix: 'rl' }) };
}

/** Microseconds Redis has spent running scripts (`EVALSHA` and `EVAL`), from INFO commandstats. */
async function scriptMicros(): Promise<number> {
  const info = await admin.info('commandstats');
  return [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=\d+,usec=(\d+),/gm)].reduce((sum, [, usec]) => sum + Number(usec), 0);
}

describe.each<StoreName>(['memory', 'redis'])('refund bounds (%s store)', (storeName) => {
  const leases: RateLimitPolicy = { algorithm: 'concurrency', limit: 5, window: '1m', name: 'jobs' };

  it('refund(concurrency, key, 3_000_000) rejects before any store work, naming the value and the bound', async () => {
    const { service } = setup(storeName);
    const store = stores.get(storeName)!;
    const refund = jest.spyOn(store, 'refund');
    const error = await service.refund(leases, tracker(), 3_000_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as Error).message).toBe(
      "refund: cost: 3000000 must be a whole number from 1 to 5 (the limit of policy 'jobs': more can never have been taken).",
    );
    // Rejected by validation alone: no store call, so nothing loops over the cost (a huge one once blocked Redis).
    expect(refund).not.toHaveBeenCalled();
    refund.mockRestore();
    await expect(admin.ping()).resolves.toBe('PONG');
  });

  it.each([0, -1, 1.5, NaN, Infinity, 2 ** 32, '2'])('refund cost %p rejects as consume would', async (cost) => {
    const { service } = setup(storeName);
    await expect(service.refund(leases, tracker(), cost as number)).rejects.toThrow(
      `refund: cost: ${typeof cost === 'string' ? `"${cost}"` : String(cost)} must be a whole number from 1 to 5`,
    );
  });

  it('the bound is the capacity: burst for the buckets, limit otherwise; a refund up to it gives the units back', async () => {
    const { service } = setup(storeName);
    const bucket: RateLimitPolicy = { algorithm: 'token-bucket', limit: 4, burst: 10, window: '1h', name: 'tb' };
    const key = tracker();
    expect((await service.consume(bucket, key, { cost: 10 })).remaining).toBe(0);
    await expect(service.refund(bucket, key, 11)).rejects.toThrow(
      "refund: cost: 11 must be a whole number from 1 to 10 (the burst of policy 'tb': more can never have been taken).",
    );
    await service.refund(bucket, key, 10);
    expect((await service.peek(bucket, key)).remaining).toBe(10);
    const fixed: RateLimitPolicy = { algorithm: 'fixed-window', limit: 3, window: '1h', name: 'fw' };
    await expect(service.refund(fixed, key, 4)).rejects.toThrow('from 1 to 3 (the limit of policy');
    await service.consume(fixed, key, { cost: 3 });
    await service.refund(fixed, key, 3);
    expect((await service.peek(fixed, key)).remaining).toBe(3);
  });

  it("consume's cost is validated the same way (a whole number; a cost above the capacity is a rejected decision)", async () => {
    const { service } = setup(storeName);
    const key = tracker();
    await expect(service.consume(leases, key, { cost: 1.5 })).rejects.toThrow('cost: 1.5 must be a whole number of units ≥ 0.');
    await expect(service.consume(leases, key, { cost: -1 })).rejects.toThrow(RateLimitConfigError);
    const huge = await service.consume(leases, key, { cost: 3_000_000 });
    expect(huge).toMatchObject({ allowed: false, reason: 'cost-exceeds-capacity', retryAfterMs: Infinity });
  });

  it('the store-level concurrency refund releases at most the leases that exist, whatever cost it is given', async () => {
    const { engine, service } = setup(storeName);
    const key = tracker();
    const compiled = compilePolicy(leases, registry, 'test', 'svc');
    const lease = (token: string) => ({ compiled, params: compiled.staticParams!, cost: 1, token });
    // Two leases with known tokens, taken as lease() takes them.
    for (const token of ['held', 'other'])
      expect((await engine.decide(trackerKeyPrefix('rl', `by:${key}`), [lease(token)], 'consume')).allowed).toBe(true);
    expect((await service.peek(leases, key)).remaining).toBe(3);
    // Past the service's validation, straight to the store: the lease 'held', with an absurd cost.
    const calls = engine.calls(trackerKeyPrefix('rl', `by:${key}`), [{ ...lease('held'), cost: 3_000_000 }]);
    const before = await scriptMicros();
    await engine.refund(calls);
    // Redis's own time in scripts (INFO commandstats), not this process's: a loop over the cost would run for
    // seconds (it once hit BUSY at 1e7), however busy the machine running the test is.
    const micros = (await scriptMicros()) - before;
    console.log(`${storeName}: store refund of cost 3_000_000 took ${micros} µs of Redis script time`);
    expect(micros).toBeLessThan(50_000);
    // Exactly the one lease was released: the other is still held.
    expect((await service.peek(leases, key)).remaining).toBe(4);
    await engine.refund(engine.calls(trackerKeyPrefix('rl', `by:${key}`), [lease('other')]));
    expect((await service.peek(leases, key)).remaining).toBe(5);
  });
});

describe.each<StoreName>(['memory', 'redis'])('lease extend (%s store)', (storeName) => {
  it('a 300 ms lease extended every 100 ms stays held past 1 s while a second lease is rejected; once extends stop it expires', async () => {
    const { service } = setup(storeName);
    const policy: RateLimitPolicy = { algorithm: 'concurrency', limit: 1, window: 300, name: 'hb' };
    const key = tracker();
    const lease = await service.lease(policy, key);
    expect(lease.decision.allowed).toBe(true);
    const started = performance.now();
    const extends_: boolean[] = [];
    const rivals: boolean[] = [];
    while (performance.now() - started < 1_100) {
      await sleep(100);
      extends_.push(await lease.extend());
      rivals.push((await service.lease(policy, key)).decision.allowed);
    }
    const heldFor = performance.now() - started;
    console.log(
      `${storeName}: ${extends_.length} extends, held for ${heldFor.toFixed(0)} ms (window 300 ms); rivals admitted: ${rivals.filter(Boolean).length}`,
    );
    expect(heldFor).toBeGreaterThan(1_000);
    expect(extends_.every(Boolean)).toBe(true);
    expect(rivals.some(Boolean)).toBe(false);

    await sleep(350);
    const rival = await service.lease(policy, key);
    expect(rival.decision.allowed).toBe(true);
    // The expired lease cannot be renewed: its slot may belong to someone else now.
    expect(await lease.extend()).toBe(false);
    expect((await service.peek(policy, key)).remaining).toBe(0);
    await rival.release();
  });

  it('extend(ms) sets the expiry to now + ms (never earlier than it was); a released lease is not held', async () => {
    const { service } = setup(storeName);
    const policy: RateLimitPolicy = { algorithm: 'concurrency', limit: 2, window: 200, name: 'hb' };
    const key = tracker();
    const lease = await service.lease(policy, key);
    expect(await lease.extend(1_000)).toBe(true);
    await sleep(400);
    expect((await service.peek(policy, key)).remaining).toBe(1);
    expect(await lease.extend(50)).toBe(true);
    expect((await service.peek(policy, key)).resetMs).toBeGreaterThan(400);
    await lease.release();
    expect(await lease.extend()).toBe(false);
    expect((await service.peek(policy, key)).remaining).toBe(2);
    await expect(lease.extend(0)).rejects.toThrow(RateLimitConfigError);
  });
});
