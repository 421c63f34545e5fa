/**
 * Calendar windows on a real Redis and a real 3-master Redis Cluster. Redis's `TIME` cannot be moved to a
 * DST night (the unit tests cover those boundaries on the memory store's clock), so this proves the part that
 * runs in Lua: given four period starts placed around Redis's real now, the script counts in the period
 * holding its own now (`[b0,b1)`, `[b1,b2)` or `[b2,b3)`), replies the exact ms to that period's end, keeps
 * the key exactly that long, and fails the decision when now lies outside `[b0, b3)`; the TypeScript twin,
 * replayed at the `nowMs` each script reported, gives the same verdicts field by field. Then real periods
 * (a day in Asia/Kolkata, a month in UTC) computed on this host are checked against Redis's clock.
 */
import { Redis, type Cluster } from 'ioredis';
import { FixedWindowAlgorithm } from '../../lib/algorithms/fixed-window';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitStoreError } from '../../lib/errors/rate-limit-store.error';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { createStore } from '../../lib/pipeline/create-store';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { ResilientStore } from '../../lib/pipeline/resilient.store';
import type { RateLimitCall, StoreDecision } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';
import { CalendarPeriods, CalendarWindows } from '../../lib/policy/calendar';
import { compilePolicy, type CompiledPolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import {
  libraryClient,
  libraryCluster,
  startRedis,
  startRedisCluster,
  type RedisClusterProcess,
  type RedisProcess,
} from '../support/redis-server';

const PREFIX = 'cal';
const S = 1000;
const H = 3_600_000;
const D = 24 * H;
const registry = new RateLimitAlgorithmRegistry();
const engine = new RateLimitEngine(new MemoryStore());

let standalone: RedisProcess | undefined;
let cluster: RedisClusterProcess | undefined;
const clients: Array<Redis | Cluster> = [];
const targets: Record<'standalone' | 'cluster', { client: Redis | Cluster; store: RedisStore }> = {} as never;

beforeAll(async () => {
  [standalone, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
  const [single, clustered] = await Promise.all([libraryClient(standalone.url), libraryCluster(cluster.startupNodes)]);
  clients.push(single, clustered);
  targets.standalone = { client: single, store: new RedisStore(single, registry.all(), false) };
  targets.cluster = { client: clustered, store: new RedisStore(clustered, registry.all(), false) };
}, 60_000);

afterAll(async () => {
  for (const client of clients) client.disconnect();
  await standalone?.stop();
  await cluster?.stop();
});

let trackers = 0;
const calendarPolicy = (window: object, limit = 2): CompiledPolicy =>
  compilePolicy({ algorithm: 'fixed-window', limit, window, name: 'cal' } as never, registry, 'test', 'r=t');

/** One call of `compiled` with `periods`, for a tracker of its own. */
function callFor(compiled: CompiledPolicy, periods: CalendarPeriods, limit: number): RateLimitCall[] {
  return engine.calls(trackerKeyPrefix(PREFIX, `t${++trackers}`), [{ compiled, params: periods.params(limit, limit), cost: 1 }]);
}

/** Redis's clock in ms, as decide.lua reads it. */
async function redisNow(client: Redis | Cluster): Promise<number> {
  const [sec, usec] = await client.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

const synthetic = (starts: number[]) =>
  new CalendarPeriods(starts as [number, number, number, number], () => {
    throw new Error('synthetic periods are never recomputed');
  });

describe.each(['standalone', 'cluster'] as const)('calendar windows on Redis (%s)', (target) => {
  // Period starts around Redis's now, in seconds; the one holding now is `picked`. Ten seconds of margin
  // keep the script's now (a few ms after TIME) in the same period.
  it.each([
    { period: '[b0, b1)', offsets: [-10, 10, 20, 30], picked: 0 },
    { period: '[b1, b2)', offsets: [-20, -10, 10, 20], picked: 1 },
    { period: '[b2, b3)', offsets: [-30, -20, -10, 10], picked: 2 },
  ])('counts in the period holding its now, $period, as the twin does', async ({ offsets, picked }) => {
    const { client, store } = targets[target];
    const t = await redisNow(client);
    const starts = offsets.map((o) => t + o * S);
    const end = starts[picked + 1];
    const calls = callFor(calendarPolicy({ calendar: 'day' }), synthetic(starts), 2);
    const replay = new MemoryStore({ clock: () => now });
    let now = 0;

    const steps: StoreDecision[] = [];
    for (const step of ['consume', 'consume', 'consume', 'refund', 'consume', 'peek'] as const) {
      if (step === 'refund') {
        await store.refund(calls);
        await replay.refund(calls);
        continue;
      }
      const d = await store.decide(calls, step);
      now = d.nowMs;
      expect(d).toEqual(await replay.decide(calls, step));
      steps.push(d);
    }
    const left = (d: StoreDecision) => end - d.nowMs;
    expect(steps.map((d) => d.verdicts[0])).toEqual([
      {
        allowed: true,
        remaining: 1,
        resetMs: left(steps[0]),
        retryAfterMs: 0,
        delayMs: 0,
        moreQuotaMs: left(steps[0]),
        reason: Verdict.Allowed,
      },
      {
        allowed: true,
        remaining: 0,
        resetMs: left(steps[1]),
        retryAfterMs: 0,
        delayMs: 0,
        moreQuotaMs: left(steps[1]),
        reason: Verdict.Allowed,
      },
      {
        allowed: false,
        remaining: 0,
        resetMs: left(steps[2]),
        retryAfterMs: left(steps[2]),
        delayMs: 0,
        moreQuotaMs: left(steps[2]),
        reason: Verdict.Limited,
      },
      {
        allowed: true,
        remaining: 0,
        resetMs: left(steps[3]),
        retryAfterMs: 0,
        delayMs: 0,
        moreQuotaMs: left(steps[3]),
        reason: Verdict.Allowed,
      },
      // A peek of one unit, with the period's two spent: it fits once the period has ended.
      {
        allowed: false,
        remaining: 0,
        resetMs: left(steps[4]),
        retryAfterMs: left(steps[4]),
        delayMs: 0,
        moreQuotaMs: left(steps[4]),
        reason: Verdict.Limited,
      },
    ]);
    // The key counts the period's units and lives until the period's end, no longer.
    expect(await client.get(calls[0].stateKey)).toBe('2');
    const pttl = await client.pttl(calls[0].stateKey);
    expect(pttl).toBeGreaterThan(left(steps[0]) - 5 * S);
    expect(pttl).toBeLessThanOrEqual(left(steps[0]));
  });

  it.each([
    { side: 'ahead of', offsets: [10, 20, 30, 40] },
    { side: 'behind', offsets: [-40, -30, -20, -10] },
  ])('fails the decision when every period is $side its clock, and writes nothing', async ({ offsets }) => {
    const { client, store } = targets[target];
    const t = await redisNow(client);
    const starts = offsets.map((o) => t + o * S);
    const periods = synthetic(starts);
    const calls = callFor(calendarPolicy({ calendar: 'day' }), periods, 2);
    const error = await store.decide(calls, 'consume').then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error).toBeInstanceOf(RateLimitStoreError);
    const match = /^Redis failed the decision: (calendar window: the store's clock \((\d+) ms\) is outside .*)$/.exec(error!.message);
    expect(match).not.toBeNull();
    expect(match![1]).toBe(
      `calendar window: the store's clock (${match![2]} ms) is outside the periods computed on this host (${starts[0]} to ${starts[3]} ms): the clocks differ by more than a period.`,
    );
    // The twin, at the same instant, fails with the same words.
    expect(() => new FixedWindowAlgorithm().check(undefined, periods.params(2, 2), 1, Number(match![2]))).toThrow(match![1]);
    await expect(store.refund(calls)).rejects.toThrow(/calendar window: the store's clock \(\d+ ms\) is outside/);
    expect(await client.exists(calls[0].stateKey)).toBe(0);
  });

  it('counts a real day in Asia/Kolkata (UTC+5:30) and a real month in UTC to their ends on the Redis clock', async () => {
    const { client, store } = targets[target];
    const IST = 5.5 * H;
    const cases = [
      { window: { calendar: 'day', timeZone: 'Asia/Kolkata' }, end: (now: number) => Math.floor((now + IST) / D) * D + D - IST },
      {
        window: { calendar: 'month' },
        end: (now: number) => Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth() + 1, 1),
      },
    ];
    for (const { window, end } of cases) {
      const compiled = calendarPolicy(window, 3);
      // A few trackers, so that on the cluster the keys land on different masters.
      for (let i = 0; i < 4; i++) {
        const calls = engine.calls(trackerKeyPrefix(PREFIX, `real-${++trackers}`), [{ compiled, params: compiled.staticParams!, cost: 1 }]);
        const d = await store.decide(calls, 'consume');
        const ends = end(d.nowMs);
        expect(d.verdicts[0]).toMatchObject({ allowed: true, remaining: 2, resetMs: ends - d.nowMs, moreQuotaMs: ends - d.nowMs });
        expect(compiled.staticParams!.periods!.endOf(compiled.staticParams!.periods!.startAt(d.nowMs))).toBe(ends);
        expect(await client.get(calls[0].stateKey)).toBe('1');
        const pttl = await client.pttl(calls[0].stateKey);
        expect(pttl).toBeGreaterThan(ends - d.nowMs - 60_000);
        expect(pttl).toBeLessThanOrEqual(ends - d.nowMs);
      }
    }
  });

  it('through RateLimiterService and the full store stack: a monthly quota, rejected until the 1st (UTC)', async () => {
    const options: RateLimitModuleOptions = {
      redis: targets[target].client,
      prefix: PREFIX,
      onStoreError: 'fail-closed',
      storeTimeoutMs: 5_000,
    };
    const stack = createStore(options, registry);
    const limiter = new RateLimiterService(new RateLimitEngine(stack, options), registry, options);
    const monthly: RateLimitPolicy = { algorithm: 'fixed-window', limit: 2, window: { calendar: 'month' }, name: 'monthly' };
    const tracker = `service-${++trackers}`;
    // Redis runs on this machine: its TIME lies between these two readings of ours.
    const before = Date.now();
    const decisions = [
      await limiter.consume(monthly, tracker),
      await limiter.consume(monthly, tracker),
      await limiter.consume(monthly, tracker),
    ];
    const after = Date.now();
    const end = Date.UTC(new Date(after).getUTCFullYear(), new Date(after).getUTCMonth() + 1, 1);
    expect(decisions.map(({ allowed, remaining, reason }) => ({ allowed, remaining, reason }))).toEqual([
      { allowed: true, remaining: 1, reason: undefined },
      { allowed: true, remaining: 0, reason: undefined },
      { allowed: false, remaining: 0, reason: undefined },
    ]);
    expect(decisions[2].retryAfterMs).toBeGreaterThanOrEqual(end - after);
    expect(decisions[2].retryAfterMs).toBeLessThanOrEqual(end - before);
    await stack.close();
  });
});

describe('a calendar decision Redis fails goes to the policy’s fallback', () => {
  it.each([
    { fallback: 'fail-closed' as const, allowed: false, remaining: 0 },
    // The insurance store is in-process: it recomputes the periods around its own clock and decides.
    { fallback: 'insurance' as const, allowed: true, remaining: 1 },
  ])('$fallback', async ({ fallback, allowed, remaining }) => {
    const { client, store } = targets.standalone;
    const errors: Error[] = [];
    const resilient = new ResilientStore(store, {
      timeoutMs: 5_000,
      insuranceShare: 1,
      logIntervalMs: 3_600_000,
      retryAfterFailureMs: 0,
      onError: (e) => errors.push(e),
    });
    // Periods as a host whose clock is two days ahead computes them: from tomorrow on.
    const windows = new CalendarWindows();
    const day = { calendar: 'day' } as const;
    const ahead = windows.around(day, (await redisNow(client)) + 2 * D, 'window');
    const periods = new CalendarPeriods(ahead.starts, (now) => windows.around(day, now, 'window'));
    const calls = callFor(calendarPolicy(day), periods, 2).map((call) => ({ ...call, fallback }));
    const d = await resilient.decide(calls, 'consume');
    expect(d.verdicts[0]).toMatchObject({ allowed, remaining, reason: Verdict.StoreUnavailable });
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/^Redis failed the decision: calendar window: the store's clock/)]);
    await resilient.close();
  });
});
