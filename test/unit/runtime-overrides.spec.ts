/**
 * Runtime overrides without a server: the matcher (the most specific wins: exact, the longest prefix, `*`; one
 * map lookup per distinct prefix length), the effective numbers per algorithm, every validation message of
 * `setOverride`, the bounds (pattern length, count), the instance's copy kept in step with a remote store by
 * its poll (a change applied by the first poll after it; the hash read only when the version moved; a failed
 * poll keeps the last copy), and `until` on the store's clock (a test clock here).
 */
import { Controller, Get, Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  RateLimit,
  RateLimitAdmin,
  RateLimitConfigError,
  RateLimiterService,
  RateLimitStoreError,
  type RateLimitOverrideEvent,
  type RateLimitPolicy,
} from '../../lib';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { OVERRIDE_POLL_MS, RateLimitOverrides } from '../../lib/pipeline/override-sync';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { compilePolicy } from '../../lib/policy/compile-policy';
import {
  MAX_OVERRIDES,
  MAX_TRACKER_PATTERN_LENGTH,
  overriddenParams,
  overrideField,
  overrideJson,
  parseStoredOverride,
} from '../../lib/policy/runtime-overrides';
import { OverrideTable } from '../../lib/policy/override-table';
import { RateLimitTestClock, RateLimitTestingModule } from '../../lib/testing';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import type { OverrideKeys, OverrideRead, OverrideWrite, RateLimitStore } from '../../lib/stores/store.interface';

const registry = new RateLimitAlgorithmRegistry();

/** An entry as an instance holds it, for `policy` and a pattern as matched. */
function entry(policy: string, pattern: string, limit: number) {
  return parseStoredOverride(overrideField(policy, pattern), overrideJson(pattern, { limit }, undefined), 0, 0)!;
}

describe('OverrideTable', () => {
  const table = new OverrideTable();
  for (const [pattern, limit] of [
    ['*', 1],
    ['by:g*', 2],
    ['by:gold-*', 3],
    ['by:gold-v*', 4],
    ['by:gold-vip', 5],
    ['ip:10.0.*', 6],
  ] as const)
    table.set(entry('api', pattern, limit));
  table.set(entry('other', 'by:gold-vip', 50));
  const limitOf = (tracker: string, policy = 'api') => table.match(policy, tracker)?.limit;

  it('matches the exact tracker first, then the longest prefix, then *', () => {
    expect(table.size).toBe(7);
    expect(limitOf('by:gold-vip')).toBe(5);
    expect(limitOf('by:gold-vipx')).toBe(4);
    expect(limitOf('by:gold-1')).toBe(3);
    expect(limitOf('by:green')).toBe(2);
    expect(limitOf('by:acme')).toBe(1);
    expect(limitOf('ip:10.0.0.1')).toBe(6);
    expect(limitOf('ip:10.1.0.1')).toBe(1);
    // A prefix longer than the tracker is skipped; a prefix equal to it matches.
    expect(limitOf('by:gold-')).toBe(3);
    expect(limitOf('by:')).toBe(1);
  });

  it('keeps each policy name apart: a name without overrides matches nothing', () => {
    expect(limitOf('by:gold-vip', 'other')).toBe(50);
    expect(limitOf('by:gold-1', 'other')).toBeUndefined();
    expect(limitOf('by:gold-vip', 'none')).toBeUndefined();
    expect(table.has('api') && table.has('other') && !table.has('none')).toBe(true);
  });

  it('falls back to the next most specific when one is deleted, and forgets a name with none left', () => {
    const t = new OverrideTable();
    for (const [pattern, limit] of [
      ['*', 1],
      ['by:a*', 2],
      ['by:ab*', 3],
      ['by:abc', 4],
    ] as const)
      t.set(entry('p', pattern, limit));
    const trail: Array<number | undefined> = [];
    for (const pattern of ['by:abc', 'by:ab*', 'by:a*', '*']) {
      trail.push(t.match('p', 'by:abc')?.limit);
      t.delete('p', pattern);
    }
    expect(trail).toEqual([4, 3, 2, 1]);
    expect(t.match('p', 'by:abc')).toBeUndefined();
    expect([t.size, t.has('p')]).toEqual([0, false]);
  });

  it('replaces an override set again for the same pattern (the count stays)', () => {
    const t = new OverrideTable();
    t.set(entry('p', 'by:x*', 1));
    t.set(entry('p', 'by:x*', 9));
    expect([t.size, t.match('p', 'by:xy')?.limit]).toEqual([1, 9]);
  });
});

describe('overriddenParams', () => {
  const compiled = (policy: RateLimitPolicy) => compilePolicy(policy, registry, 'test', 'svc');
  const params = (policy: RateLimitPolicy) => compiled(policy).staticParams!;
  const apply = (policy: RateLimitPolicy, o: { limit?: number; windowMs?: number; burst?: number }) =>
    overriddenParams(compiled(policy), params(policy), { limit: o.limit, windowMs: o.windowMs, burst: o.burst });

  it('replaces what the override sets; a bucket’s burst follows the limit unless the policy or the override sets it', () => {
    expect(apply({ algorithm: 'fixed-window', limit: 2, window: '1m' }, { limit: 5 })).toEqual({ limit: 5, windowMs: 60_000, burst: 5 });
    expect(apply({ algorithm: 'token-bucket', limit: 2, window: '1m' }, { limit: 5 })).toEqual({ limit: 5, windowMs: 60_000, burst: 5 });
    expect(apply({ algorithm: 'token-bucket', limit: 2, window: '1m', burst: 10 }, { limit: 5 })).toEqual({
      limit: 5,
      windowMs: 60_000,
      burst: 10,
    });
    expect(apply({ algorithm: 'gcra', limit: 2, window: '1m' }, { burst: 7 })).toEqual({ limit: 2, windowMs: 60_000, burst: 7 });
    expect(apply({ algorithm: 'sliding-log', limit: 2, window: '1m' }, { windowMs: 1_000 })).toEqual({
      limit: 2,
      windowMs: 1_000,
      burst: 2,
    });
  });

  it('returns the policy’s own params when nothing changes, or when a window meets a calendar window', () => {
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 2, window: '1m' };
    const own = compiled(policy);
    expect(overriddenParams(own, own.staticParams!, { limit: 2, windowMs: undefined, burst: undefined })).toBe(own.staticParams);
    const month = compiled({ algorithm: 'fixed-window', limit: 2, window: { calendar: 'month' } });
    const monthly = month.staticParams!;
    const applied = overriddenParams(month, monthly, { limit: 9, windowMs: 1_000, burst: undefined });
    expect({ ...applied, periods: applied.periods === monthly.periods }).toEqual({ ...monthly, limit: 9, burst: 9, periods: true });
  });
});

@Controller('v')
class ValidationController {
  @Get('api')
  @RateLimit({ name: 'api', algorithm: 'fixed-window', limit: 2, window: '1m' })
  api() {}

  @Get('bucket')
  @RateLimit({ name: 'bucket', algorithm: 'token-bucket', limit: 5, window: '1m', cost: 3 })
  bucket() {}

  @Get('month')
  @RateLimit({ name: 'month', algorithm: 'fixed-window', limit: 100, window: { calendar: 'month' } })
  month() {}
}

describe('setOverride validation', () => {
  let admin: RateLimitAdmin;
  let clock: RateLimitTestClock;
  beforeAll(async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RateLimitTestingModule.forRoot({ defaultPolicy: { name: 'global', algorithm: 'gcra', limit: 10, window: '1s' } })],
      controllers: [ValidationController],
    }).compile();
    await moduleRef.init();
    admin = moduleRef.get(RateLimitAdmin);
    clock = moduleRef.get(RateLimitTestClock);
  });

  const refused = async (call: Promise<void>) => {
    const error = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(RateLimitConfigError);
    return (error as Error).message;
  };

  it.each([
    [
      'an unknown policy',
      () => admin.setOverride('apii', 'acme', { limit: 5 }),
      "setOverride: policy: 'apii' names no policy of this app (its policies: 'api', 'bucket', 'global', 'month'); give the name of a defaultPolicy or route policy, or of one RateLimiterService has been called with.",
    ],
    [
      'a name no policy can have',
      () => admin.setOverride('a b', 'acme', { limit: 5 }),
      'setOverride: policy: "a b" must be a policy\'s name (1-64 characters of A-Z a-z 0-9 _ . -).',
    ],
    ['a limit of 0', () => admin.setOverride('api', 'acme', { limit: 0 }), 'setOverride: limit: 0 must be a whole number ≥ 1.'],
    ['a fractional limit', () => admin.setOverride('api', 'acme', { limit: 1.5 }), 'setOverride: limit: 1.5 must be a whole number ≥ 1.'],
    [
      'a limit past 2^53',
      () => admin.setOverride('api', 'acme', { limit: 2 ** 53 }),
      'setOverride: limit: 9007199254740992 must be a whole number ≥ 1.',
    ],
    [
      'a string limit',
      () => admin.setOverride('api', 'acme', { limit: '5' as never }),
      'setOverride: limit: "5" must be a whole number ≥ 1.',
    ],
    ['a burst of NaN', () => admin.setOverride('bucket', 'acme', { burst: NaN }), 'setOverride: burst: NaN must be a whole number ≥ 1.'],
    [
      'a burst on an algorithm without one',
      () => admin.setOverride('api', 'acme', { burst: 5 }),
      "setOverride: burst: 5: policy 'api' uses 'fixed-window', which has no burst (only token-bucket, gcra and leaky-bucket do); set limit instead.",
    ],
    [
      'a window on a calendar window',
      () => admin.setOverride('month', 'acme', { window: '1h' }),
      'setOverride: window: policy \'month\' counts in calendar periods ({"calendar":"month"}), which a window cannot replace; set limit only.',
    ],
    [
      'a window that is no duration',
      () => admin.setOverride('api', 'acme', { window: 'soon' as never }),
      "setOverride: window: \"soon\" is not a valid duration; use a positive whole number of milliseconds or a string such as '250ms', '1s', '1m', '1h', '1d'.",
    ],
    [
      'a calendar window',
      () => admin.setOverride('api', 'acme', { window: { calendar: 'day' } as never }),
      'setOverride: window: {"calendar":"day"}: an override\'s window is a duration (\'1m\', 60000); calendar windows are set by the policy.',
    ],
    [
      'a limit × window past 2^50',
      () => admin.setOverride('api', 'acme', { limit: 2 ** 40, window: '1d' }),
      "setOverride: limit × window is too large for policy 'api' (1099511627776 × 86400000 ms); keep it at most 2^50, for example with a shorter window and a proportionally smaller limit.",
    ],
    [
      'a capacity below the fixed cost',
      () => admin.setOverride('bucket', 'acme', { burst: 2 }),
      "setOverride: burst: 2 is less than the cost of policy 'bucket' (token-bucket, cost 3), so every request would be rejected; set burst to at least 3.",
    ],
    [
      'a limit (the burst it sets) below the fixed cost',
      () => admin.setOverride('bucket', 'acme', { limit: 1 }),
      "setOverride: limit: 1 is less than the cost of policy 'bucket' (token-bucket, cost 3), so every request would be rejected; set limit to at least 3.",
    ],
    [
      'an override setting nothing',
      () => admin.setOverride('api', 'acme', {}),
      'setOverride: override: {} sets nothing; give limit, window and/or burst (to go back to the policy as written, call removeOverride).',
    ],
    [
      'an unknown field',
      () => admin.setOverride('api', 'acme', { limit: 5, cost: 2 } as never),
      "setOverride: override: unknown field 'cost'; an override sets limit, window and/or burst.",
    ],
    [
      'no override object',
      () => admin.setOverride('api', 'acme', null as never),
      'setOverride: override: null must be an object such as { limit: 5 }, with limit, window and/or burst.',
    ],
    [
      'an empty tracker',
      () => admin.setOverride('api', '', { limit: 5 }),
      "setOverride: tracker: \"\" must be a non-empty string: a tracker ('acme', 'ip:203.0.113.7', 'user:42'), a prefix ending in '*' ('gold-*'), or '*'.",
    ],
    [
      'a tracker longer than 256 characters',
      () => admin.setOverride('api', 'x'.repeat(MAX_TRACKER_PATTERN_LENGTH + 1), { limit: 5 }),
      "setOverride: tracker: 257 characters; at most 256 are kept (a longer value is better matched by a prefix ending in '*').",
    ],
    [
      'a bare IP address',
      () => admin.setOverride('api', '203.0.113.7', { limit: 5 }),
      "setOverride: tracker: \"203.0.113.7\" is a bare IP address, which names no tracker: write 'ip:203.0.113.7' for the client at that address, or 'by:203.0.113.7' for a value your by function returns.",
    ],
    [
      'an until that is no date',
      () => admin.setOverride('api', 'acme', { limit: 5 }, { until: new Date('soon') }),
      "setOverride: until: Invalid Date is not a valid date; give a Date, or ms since the epoch (on the store's clock), in the future.",
    ],
    [
      'an until in the past (on the store’s clock)',
      () => admin.setOverride('api', 'acme', { limit: 5 }, { until: new Date('2024-12-31T23:59:59Z') }),
      "setOverride: until: 2024-12-31T23:59:59.000Z is not in the future (the store's clock reads 2025-01-01T00:00:00.000Z).",
    ],
  ])('refuses %s, naming the field and the value', async (_, call, message) => {
    expect(await refused(call())).toBe(message);
    expect(await admin.listOverrides()).toEqual([]);
  });

  it('takes a limit and window for a limit function, and a Date or ms for until, on the store’s clock', async () => {
    await admin.setOverride('api', 'acme', { limit: 5, window: '2m' }, { until: clock.now() + 60_000 });
    await admin.setOverride('bucket', 'gold-*', { burst: 9 }, { until: new Date(clock.now() + 1_000) });
    expect(await admin.listOverrides()).toEqual([
      { policy: 'api', tracker: 'acme', override: { limit: 5, window: '2m' }, until: clock.now() + 60_000 },
      { policy: 'bucket', tracker: 'gold-*', override: { burst: 9 }, until: clock.now() + 1_000 },
    ]);
    clock.advance(1_000);
    expect((await admin.listOverrides()).map((o) => o.tracker)).toEqual(['acme']);
    await admin.removeOverride('api', 'acme');
    expect(await admin.listOverrides()).toEqual([]);
  });
});

/** A remote store shared by instances: a memory store's overrides, but not in-process (so each instance polls it). */
class SharedRemote implements Pick<RateLimitStore, 'inProcess' | 'readOverrides' | 'writeOverride'> {
  readonly inProcess = false;
  /** Reads that returned the whole set. */
  fullReads = 0;
  failing: Error | undefined;
  private readonly memory = new MemoryStore();

  async readOverrides(keys: OverrideKeys, version: string | undefined): Promise<OverrideRead> {
    if (this.failing) throw this.failing;
    const read = await this.memory.readOverrides(keys, version);
    if (read.entries) this.fullReads++;
    return read;
  }

  writeOverride(keys: OverrideKeys, write: OverrideWrite) {
    return this.memory.writeOverride(keys, write);
  }
}

describe('RateLimitOverrides on a remote store', () => {
  afterEach(() => jest.useRealTimers());

  async function instances() {
    jest.useFakeTimers({ doNotFake: ['performance'] });
    const remote = new SharedRemote();
    const events: Record<'a' | 'b', RateLimitOverrideEvent[]> = { a: [], b: [] };
    const make = (name: 'a' | 'b') =>
      new RateLimitOverrides(remote as unknown as RateLimitStore, { hooks: { override: (e) => events[name].push(e) } });
    const [a, b] = [make('a'), make('b')];
    await a.start();
    await b.start();
    return { remote, a, b, events };
  }
  /** One poll interval, and the read it started. */
  const poll = () => jest.advanceTimersByTimeAsync(OVERRIDE_POLL_MS);

  it('applies a change made elsewhere by the first poll after it, reading the whole set only when its version moved', async () => {
    const { remote, a, b, events } = await instances();
    expect(remote.fullReads).toBe(2);
    await poll();
    await poll();
    expect(remote.fullReads).toBe(2);
    await a.set('api', 'by:acme', 'acme', { limit: 5 }, undefined);
    expect([a.match('api', 'by:acme')?.limit, b.match('api', 'by:acme')]).toEqual([5, undefined]);
    await poll();
    expect(b.match('api', 'by:acme')?.limit).toBe(5);
    expect(remote.fullReads).toBe(3);
    expect(events).toEqual({
      a: [{ action: 'applied', local: true, policy: 'api', tracker: 'acme', override: { limit: 5 } }],
      b: [{ action: 'applied', local: false, policy: 'api', tracker: 'acme', override: { limit: 5 } }],
    });
    await a.remove('api', 'by:acme');
    await poll();
    expect([a.active, b.active]).toEqual([false, false]);
    expect(events.b.map((e) => e.action)).toEqual(['applied', 'removed']);
    a.stop();
    b.stop();
  });

  it('keeps the last copy when a poll fails, warns once per 10 s, and catches up when the store answers', async () => {
    const { remote, a, b } = await instances();
    await a.set('api', '*', '*', { limit: 7 }, undefined);
    await poll();
    // Only B polls from here (A would warn too: each instance tells its own operator).
    a.stop();
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    remote.failing = new Error('connection refused');
    await a.set('api', 'by:x*', 'x*', { limit: 8 }, undefined);
    await poll();
    await poll();
    expect([b.match('api', 'by:xy')?.limit, b.match('api', 'by:zz')?.limit]).toEqual([7, 7]);
    expect(warn.mock.calls.map(([line]) => line)).toEqual([
      'Runtime overrides could not be read: the rate-limit store failed (connection refused). They are read again every 500 ms; meanwhile the 1 override read last stays in force.',
    ]);
    warn.mockRestore();
    remote.failing = undefined;
    await poll();
    expect(b.match('api', 'by:xy')?.limit).toBe(8);
    a.stop();
    b.stop();
  });

  it('does not hold the app’s startup for a store that does not answer: the load goes on in the background', async () => {
    jest.useFakeTimers({ doNotFake: ['performance'] });
    const remote = new SharedRemote();
    await new RateLimitOverrides(remote as unknown as RateLimitStore).set('api', '*', '*', { limit: 4 }, undefined);
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const read = remote.readOverrides.bind(remote);
    remote.readOverrides = async (keys, version) => {
      await answered;
      return read(keys, version);
    };
    const late = new RateLimitOverrides(remote as unknown as RateLimitStore);
    let started = false;
    void late.start().then(() => (started = true));
    await jest.advanceTimersByTimeAsync(2_999);
    expect(started).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect([started, late.active]).toEqual([true, false]);
    answer();
    await jest.advanceTimersByTimeAsync(0);
    expect(late.match('api', 'by:x')?.limit).toBe(4);
    late.stop();
  });

  it('refuses an override beyond the most kept, naming the bound', async () => {
    const store = new MemoryStore();
    const overrides = new RateLimitOverrides(store);
    const write = store.writeOverride.bind(store);
    store.writeOverride = (keys, w) => write(keys, { ...w, maxCount: 1 });
    await overrides.set('api', 'by:a', 'a', { limit: 2 }, undefined);
    await expect(overrides.set('api', 'by:b', 'b', { limit: 2 }, undefined)).rejects.toThrow(
      `setOverride: ${MAX_OVERRIDES} overrides are set already, the most kept; remove some (removeOverride), or give them an end (until), before adding more.`,
    );
    // Setting one already kept again is no new one.
    await overrides.set('api', 'by:a', 'a', { limit: 3 }, undefined);
    expect(overrides.match('api', 'by:a')?.limit).toBe(3);
  });
});

describe('RateLimitOverrides when the store fails', () => {
  it('rejects with a RateLimitStoreError naming the call and what it means, and keeps the copy as it was', async () => {
    const store = new MemoryStore();
    const overrides = new RateLimitOverrides(store);
    await overrides.set('api', '*', '*', { limit: 3 }, undefined);
    store.writeOverride = () => Promise.reject(new Error('Connection is closed.'));
    store.readOverrides = () => Promise.reject(new Error('Connection is closed.'));
    const failure = await overrides.set('api', 'by:a', 'a', { limit: 2 }, undefined).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(RateLimitStoreError);
    expect((failure as Error).message).toBe(
      'setOverride: the rate-limit store failed (Connection is closed.); the change may or may not have been made (call again, or check listOverrides()).',
    );
    await expect(overrides.list()).rejects.toThrow(
      'listOverrides: the rate-limit store failed (Connection is closed.); the overrides could not be read.',
    );
    expect([overrides.match('api', 'by:a')?.limit, overrides.table.size]).toEqual([3, 1]);
  });
});

describe('RateLimitOverrides on the memory store', () => {
  it('ends an override at its until on the store’s clock, reporting it once, and falls back to the next most specific', async () => {
    const clock = new RateLimitTestClock();
    const events: RateLimitOverrideEvent[] = [];
    const overrides = new RateLimitOverrides(new MemoryStore({ clock: clock.now }), { hooks: { override: (e) => events.push(e) } });
    await overrides.start();
    await overrides.set('api', '*', '*', { limit: 3 }, undefined);
    await overrides.set('api', 'by:acme', 'acme', { limit: 9 }, clock.now() + 1_000);
    expect(overrides.match('api', 'by:acme')?.limit).toBe(9);
    clock.advance(999);
    expect(overrides.match('api', 'by:acme')?.limit).toBe(9);
    clock.advance(1);
    expect(overrides.match('api', 'by:acme')?.limit).toBe(3);
    expect(overrides.match('api', 'by:acme')?.limit).toBe(3);
    expect(events.map((e) => `${e.action} ${e.tracker}`)).toEqual(['applied *', 'applied acme', 'expired acme']);
    expect((await overrides.list()).map((e) => e.tracker)).toEqual(['*']);
  });
});

describe('what is counted carries over (docs/overrides.md), at one instant of a test clock', () => {
  /** `remaining` as a peek sees it after 3 units were taken under limit 4, then the override. */
  async function remainingAfter(algorithm: RateLimitPolicy['algorithm'], override: { limit?: number; window?: '2h' }): Promise<number> {
    const clock = new RateLimitTestClock();
    const svc = new RateLimiterService(new RateLimitEngine(new MemoryStore({ clock: clock.now })), registry, {});
    const policy: RateLimitPolicy = { name: 'p', algorithm, limit: 4, window: '1h' };
    for (let i = 0; i < 3; i++) expect((await svc.consume(policy, 'k')).allowed).toBe(true);
    await svc.setOverride('p', 'k', override);
    return (await svc.peek(policy, 'k')).remaining;
  }

  it.each([
    // Counts and what is owed carry over against the new limit (8 − 3 = 5); a token bucket keeps its 1 token.
    ['fixed-window', 5],
    ['sliding-window', 5],
    ['sliding-log', 5],
    ['gcra', 5],
    ['leaky-bucket', 5],
    ['token-bucket', 1],
    ['concurrency', 5],
  ] as const)('%s: limit 4 → 8 after 3 taken leaves %d', async (algorithm, remaining) => {
    expect(await remainingAfter(algorithm, { limit: 8 })).toBe(remaining);
  });

  it.each([
    // 3 counted ≥ 2: nothing left until enough ages out; a token bucket keeps its 1 token (≤ the new burst of 2).
    ['fixed-window', 0],
    ['sliding-window', 0],
    ['sliding-log', 0],
    ['gcra', 0],
    ['leaky-bucket', 0],
    ['token-bucket', 1],
    ['concurrency', 0],
  ] as const)('%s: limit 4 → 2 after 3 taken leaves %d', async (algorithm, remaining) => {
    expect(await remainingAfter(algorithm, { limit: 2 })).toBe(remaining);
  });

  it('a changed window starts a fixed or sliding window over; a log keeps what it logged', async () => {
    expect(await remainingAfter('fixed-window', { window: '2h' })).toBe(4);
    expect(await remainingAfter('sliding-window', { window: '2h' })).toBe(4);
    expect(await remainingAfter('sliding-log', { window: '2h' })).toBe(1);
  });
});
