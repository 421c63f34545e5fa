/**
 * Calendar windows: period boundaries in IANA time zones, checked against instants from the OS tz database
 * (`TZ=<zone> date -d '<local time>' +%s`, GNU date, tzdata 2025b), not against our own arithmetic; then
 * fixed-window decisions on the memory store with a fake clock set to DST nights and short months, exact to
 * the millisecond; validation messages; the twin's choice among the periods it is handed; the cache.
 */
import { FixedWindowAlgorithm } from '../../lib/algorithms/fixed-window';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import { RateLimitStoreError } from '../../lib/errors/rate-limit-store.error';
import { policyMember } from '../../lib/http/rate-limit-headers';
import type { CalendarWindow, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { CalendarPeriods, CalendarWindows } from '../../lib/policy/calendar';
import { compilePolicy, resolveParams } from '../../lib/policy/compile-policy';
import { memoryHarness } from '../support/memory-harness';

const S = 1000;
const H = 3_600_000;
const D = 24 * H;
const registry = new RateLimitAlgorithmRegistry();

interface BoundaryCase {
  what: string;
  window: CalendarWindow;
  /** An instant inside the period (s), from `date`. */
  at: number;
  /** b0..b3 in s, from `date`. */
  starts: [number, number, number, number];
  /** Length of the period holding `at`, in s. */
  length: number;
}

// Each instant is `TZ=<zone> date -d '<local>' +%s` (the comment gives the local times of b0..b3 and of `at`).
const BOUNDARIES: BoundaryCase[] = [
  {
    what: 'America/New_York, 2026-03-08: spring forward, a 23-hour day',
    window: { calendar: 'day', timeZone: 'America/New_York' },
    at: 1772985600, // 2026-03-08 12:00
    starts: [1772859600, 1772946000, 1773028800, 1773115200], // 03-07, 03-08, 03-09, 03-10 00:00
    length: 23 * 3600,
  },
  {
    what: 'America/New_York, 2026-11-01: fall back, a 25-hour day',
    window: { calendar: 'day', timeZone: 'America/New_York' },
    at: 1793552400, // 2026-11-01 12:00
    starts: [1793419200, 1793505600, 1793595600, 1793682000], // 10-31 … 11-03 00:00
    length: 25 * 3600,
  },
  {
    what: 'Europe/Berlin, 2026-03-29: a 23-hour day',
    window: { calendar: 'day', timeZone: 'Europe/Berlin' },
    at: 1774778400, // 2026-03-29 12:00
    starts: [1774652400, 1774738800, 1774821600, 1774908000], // 03-28 … 03-31 00:00
    length: 23 * 3600,
  },
  {
    what: 'Europe/Berlin, 2026-10-25: a 25-hour day',
    window: { calendar: 'day', timeZone: 'Europe/Berlin' },
    at: 1792926000, // 2026-10-25 12:00
    starts: [1792792800, 1792879200, 1792969200, 1793055600], // 10-24 … 10-27 00:00
    length: 25 * 3600,
  },
  {
    what: 'Asia/Kolkata (UTC+5:30), February 2027: a month of 28 days',
    window: { calendar: 'month', timeZone: 'Asia/Kolkata' },
    at: 1802586600, // 2027-02-14 12:00
    starts: [1798741800, 1801420200, 1803839400, 1806517800], // 2027-01-01 … 04-01 00:00
    length: 28 * 86400,
  },
  {
    what: 'Asia/Kolkata, February 2028: a leap month of 29 days',
    window: { calendar: 'month', timeZone: 'Asia/Kolkata' },
    at: 1834122600, // 2028-02-14 12:00
    starts: [1830277800, 1832956200, 1835461800, 1838140200], // 2028-01-01 … 04-01 00:00
    length: 29 * 86400,
  },
  {
    what: 'Australia/Lord_Howe, 2026-10-04: DST of 30 minutes starts, a 23.5-hour day',
    window: { calendar: 'day', timeZone: 'Australia/Lord_Howe' },
    at: 1791075600, // 2026-10-04 12:00
    starts: [1790947800, 1791034200, 1791118800, 1791205200], // 10-03 … 10-06 00:00
    length: 84600,
  },
  {
    what: 'Australia/Lord_Howe, 2026-04-05: DST ends, a 24.5-hour day',
    window: { calendar: 'day', timeZone: 'Australia/Lord_Howe' },
    at: 1775352600, // 2026-04-05 12:00
    starts: [1775221200, 1775307600, 1775395800, 1775482200], // 04-04 … 04-07 00:00
    length: 88200,
  },
  {
    what: 'America/Santiago, 2026-09-06: midnight does not exist, the day starts at 01:00',
    window: { calendar: 'day', timeZone: 'America/Santiago' },
    at: 1788706800, // 2026-09-06 12:00
    starts: [1788580800, 1788667200, 1788750000, 1788836400], // 09-05 00:00, 09-06 01:00, 09-07 00:00, 09-08 00:00
    length: 23 * 3600,
  },
  {
    what: 'America/New_York weeks from Monday (the default), across the spring-forward Sunday',
    window: { calendar: 'week', timeZone: 'America/New_York' },
    at: 1772985600, // Sunday 2026-03-08 12:00
    starts: [1771822800, 1772427600, 1773028800, 1773633600], // Mondays 02-23, 03-02, 03-09, 03-16
    length: 7 * 86400 - 3600,
  },
  {
    what: 'America/New_York weeks from Sunday (weekStartsOn: 0)',
    window: { calendar: 'week', timeZone: 'America/New_York', weekStartsOn: 0 },
    at: 1772985600, // Sunday 2026-03-08 12:00
    starts: [1772341200, 1772946000, 1773547200, 1774152000], // Sundays 03-01, 03-08, 03-15, 03-22
    length: 7 * 86400 - 3600,
  },
  {
    what: 'UTC (the default zone), February 2027',
    window: { calendar: 'month' },
    at: 1802606400, // 2027-02-14 12:00
    starts: [1798761600, 1801440000, 1803859200, 1806537600], // 2027-01-01 … 04-01 00:00
    length: 28 * 86400,
  },
  {
    what: 'Pacific/Apia skipped 2011-12-30: the period before Dec 31 is Dec 29',
    window: { calendar: 'day', timeZone: 'Pacific/Apia' },
    at: 1325282400, // 2011-12-31 12:00 (+14)
    starts: [1325152800, 1325239200, 1325325600, 1325412000], // 12-29 00:00 (−10), 12-31, 2012-01-01, 01-02 00:00 (+14)
    length: 86400,
  },
];

describe('calendar period boundaries', () => {
  it.each(BOUNDARIES)('$what', ({ window, at, starts, length }) => {
    const windows = new CalendarWindows();
    const expected = starts.map((s) => s * S);
    for (const now of [at * S, expected[1], expected[2] - 1]) {
      const periods = windows.around(window, now, 'window');
      expect(periods.starts).toEqual(expected);
      expect(periods.json).toBe(`[${expected.join(',')}]`);
      expect(periods.params(10, 10)).toEqual({ limit: 10, windowMs: length * S, burst: 10, periods });
    }
    // At b2 the next period holds now: b1..b3 move down one place.
    expect(windows.around(window, expected[2], 'window').starts.slice(0, 3)).toEqual(expected.slice(1));
  });

  it('starts a day at the first instant of its date: 01:59:59.999 and 03:00 are one millisecond apart on 2026-03-08 in New York', () => {
    const periods = new CalendarWindows().around({ calendar: 'day', timeZone: 'America/New_York' }, 1772953200 * S, 'window');
    expect(periods.startAt(1772953199 * S + 999)).toBe(1772946000 * S);
    expect(periods.startAt(1772953200 * S)).toBe(1772946000 * S);
    expect(periods.endOf(1772946000 * S)).toBe(1773028800 * S);
  });

  it('states a period as `w` in whole seconds: 82800 on a 23-hour day, 2419200 for a 28-day February, 84600 on a 23.5-hour day', () => {
    const member = (window: CalendarWindow, at: number) =>
      policyMember('daily', new CalendarWindows().around(window, at * S, 'window').params(1000, 1000), new FixedWindowAlgorithm());
    expect(member({ calendar: 'day', timeZone: 'America/New_York' }, 1772985600)).toBe('"daily";q=1000;w=82800');
    expect(member({ calendar: 'month', timeZone: 'Asia/Kolkata' }, 1802586600)).toBe('"daily";q=1000;w=2419200');
    expect(member({ calendar: 'day', timeZone: 'Australia/Lord_Howe' }, 1791075600)).toBe('"daily";q=1000;w=84600');
  });
});

describe('calendar quotas on the memory store', () => {
  const daily = (timeZone: string, limit = 3): RateLimitPolicy => ({
    algorithm: 'fixed-window',
    limit,
    window: { calendar: 'day', timeZone },
  });

  it('New York, 2026-03-08 (23 h): resets at local midnight, to the millisecond', async () => {
    const { limiter, at, advance } = memoryHarness();
    const policy = daily('America/New_York');
    at(1772946000 * S); // 00:00, the day's start: 23 h to go
    expect(await limiter.consume(policy, 'u')).toMatchObject({ allowed: true, remaining: 2, resetMs: 23 * H, moreQuotaMs: 23 * H });
    at(1773027000 * S); // 23:30
    expect(await limiter.consume(policy, 'u')).toMatchObject({ allowed: true, remaining: 1, resetMs: 30 * 60 * S });
    expect(await limiter.consume(policy, 'u')).toMatchObject({ allowed: true, remaining: 0, resetMs: 30 * 60 * S });
    expect(await limiter.consume(policy, 'u')).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 30 * 60 * S });
    advance(30 * 60 * S - 1);
    expect(await limiter.consume(policy, 'u')).toMatchObject({ allowed: false, retryAfterMs: 1 });
    advance(1); // 2026-03-09 00:00, a day of 24 h
    expect(await limiter.peek(policy, 'u')).toMatchObject({ allowed: true, remaining: 3, resetMs: 0 });
    expect(await limiter.consume(policy, 'u')).toMatchObject({ allowed: true, remaining: 2, resetMs: D });
  });

  it('New York, 2026-11-01 (25 h) and Europe/Berlin, 2026-10-25 (25 h)', async () => {
    const { limiter, at } = memoryHarness();
    at(1793505600 * S);
    expect(await limiter.consume(daily('America/New_York'), 'u')).toMatchObject({ remaining: 2, resetMs: 25 * H });
    at(1792879200 * S + 1);
    expect(await limiter.consume(daily('Europe/Berlin'), 'u')).toMatchObject({ remaining: 2, resetMs: 25 * H - 1 });
  });

  it('Europe/Berlin, 2026-03-29 (23 h): a rejection waits until local midnight', async () => {
    const { limiter, at } = memoryHarness();
    const policy = daily('Europe/Berlin', 1);
    at(1774778400 * S); // 12:00 CEST: 12 h left, though the day is only 11 h past its start
    expect(await limiter.consume(policy, 'u')).toMatchObject({ allowed: true, resetMs: 12 * H });
    expect(await limiter.consume(policy, 'u')).toMatchObject({ allowed: false, retryAfterMs: 12 * H });
  });

  it('Asia/Kolkata, February 2027: a monthly quota of 28 days, then March', async () => {
    const { limiter, at } = memoryHarness();
    const monthly: RateLimitPolicy = { algorithm: 'fixed-window', limit: 50_000, window: { calendar: 'month', timeZone: 'Asia/Kolkata' } };
    at(1801420200 * S); // 2027-02-01 00:00 IST
    expect(await limiter.consume(monthly, 'key', { cost: 49_999 })).toMatchObject({ remaining: 1, resetMs: 28 * D });
    at(1803839400 * S - 1); // 2027-02-28 23:59:59.999
    expect(await limiter.consume(monthly, 'key', { cost: 2 })).toMatchObject({ allowed: false, remaining: 1, retryAfterMs: 1 });
    at(1803839400 * S); // 2027-03-01 00:00: 31 days
    expect(await limiter.consume(monthly, 'key', { cost: 2 })).toMatchObject({ allowed: true, remaining: 49_998, resetMs: 31 * D });
  });

  it('Australia/Lord_Howe, 2026-10-04: a day of 23.5 hours', async () => {
    const { limiter, at } = memoryHarness();
    at(1791034200 * S);
    expect(await limiter.consume(daily('Australia/Lord_Howe'), 'u')).toMatchObject({ remaining: 2, resetMs: 84600 * S });
  });

  it('keeps a counter no longer than its period: the key is gone once the day has ended', async () => {
    // A store of 10 keys sweeps from its second key on (past a tenth of maxKeys).
    const { limiter, store, at } = memoryHarness(10);
    at(1772985600 * S);
    await limiter.consume(daily('America/New_York'), 'u');
    expect(store.size).toBe(1);
    at(1773028800 * S + 1); // the next day's first write sweeps the expired key
    await limiter.consume(daily('America/New_York'), 'v');
    expect(store.size).toBe(1);
  });

  it('counts a tracker whose zone changes afresh, in the period of its new zone', async () => {
    const { limiter, at } = memoryHarness();
    const policy = (timeZone: string): RateLimitPolicy => ({ ...daily(timeZone, 5), scope: 'tz' });
    at(1772985600 * S); // 2026-03-08 16:00 UTC: 12:00 in New York, 17:00 in Berlin
    expect(await limiter.consume(policy('America/New_York'), 'u')).toMatchObject({ remaining: 4, resetMs: 12 * H });
    expect(await limiter.consume(policy('America/New_York'), 'u')).toMatchObject({ remaining: 3, resetMs: 12 * H });
    expect(await limiter.consume(policy('Europe/Berlin'), 'u')).toMatchObject({ remaining: 4, resetMs: 7 * H });
  });
});

describe('the fixed-window twin picks the period holding the store clock', () => {
  const twin = new FixedWindowAlgorithm();
  const periods = new CalendarPeriods([1000, 2000, 2500, 4000], () => {
    throw new Error('not asked');
  });
  const params = periods.params(2, 2);

  it.each([
    [1000, 1000, 1000],
    [1999, 1000, 1],
    [2000, 2000, 500],
    [2499, 2000, 1],
    [2500, 2500, 1500],
    [3999, 2500, 1],
  ])('at %i: window %i, %i ms to its end', (now, id, left) => {
    const v = twin.check(undefined, params, 1, now);
    expect(v).toMatchObject({ allowed: true, remaining: 1, resetMs: left, next: { w: id, n: 1 }, ttlMs: left });
    expect(twin.check({ w: id, n: 2 }, params, 1, now)).toMatchObject({ allowed: false, retryAfterMs: left });
    // A count from another period is not this one's.
    expect(twin.check({ w: id === 1000 ? 2000 : 1000, n: 2 }, params, 1, now)).toMatchObject({ allowed: true, remaining: 1 });
    expect(twin.refund({ w: id, n: 2 }, params, 1, now, '')).toEqual({ next: { w: id, n: 1 }, ttlMs: left });
  });

  it.each([999, 4000])('fails at %i, outside [b0, b3): the store clock is a period away', (now) => {
    const message = `calendar window: the store's clock (${now} ms) is outside the periods computed on this host (1000 to 4000 ms): the clocks differ by more than a period.`;
    expect(() => twin.check(undefined, params, 1, now)).toThrow(new RateLimitStoreError(message));
    expect(() => twin.refund({ w: 2000, n: 1 }, params, 1, now, '')).toThrow(message);
  });
});

describe('calendar window validation', () => {
  const compile = (policy: Partial<RateLimitPolicy>) =>
    compilePolicy({ algorithm: 'fixed-window', limit: 10, ...policy } as RateLimitPolicy, registry, '@RateLimit on C.h', 'r=C.h');

  it.each<[string, unknown, string]>([
    [
      'an unknown zone',
      { calendar: 'day', timeZone: 'Mars/Olympus_Mons' },
      `@RateLimit on C.h: window: timeZone "Mars/Olympus_Mons" is not a time zone this runtime knows; use an IANA name such as 'Europe/Paris' or 'America/New_York' (Intl.supportedValuesOf('timeZone') lists them), or 'UTC'.`,
    ],
    [
      'an unknown period',
      { calendar: 'year' },
      `@RateLimit on C.h: window: calendar: "year" must be one of 'day', 'week', 'month' (a calendar window such as { calendar: 'day', timeZone: 'Europe/Paris' }).`,
    ],
    [
      'weekStartsOn 7',
      { calendar: 'week', weekStartsOn: 7 },
      '@RateLimit on C.h: window: weekStartsOn: 7 must be a whole number from 0 (Sunday) to 6 (Saturday).',
    ],
    [
      'an unknown field',
      { calendar: 'day', timezone: 'Europe/Paris' },
      "@RateLimit on C.h: window: unknown calendar window field 'timezone'; known fields are calendar, timeZone, weekStartsOn.",
    ],
    [
      'a zone name longer than any',
      { calendar: 'day', timeZone: 'x'.repeat(100) },
      `@RateLimit on C.h: window: timeZone: "${'x'.repeat(64)}" must be an IANA time zone name such as 'Europe/Paris' (at most 64 letters, digits and _ + - /).`,
    ],
    [
      'a zone name with characters no zone has',
      { calendar: 'day', timeZone: 'Europe/Paris\n' },
      `@RateLimit on C.h: window: timeZone: "Europe/Paris\\n" must be an IANA time zone name such as 'Europe/Paris' (at most 64 letters, digits and _ + - /).`,
    ],
    [
      'a bad duration (which says a calendar window is possible)',
      '1 day',
      `@RateLimit on C.h: window: "1 day" is not a valid duration; use a positive whole number of milliseconds or a string such as '250ms', '1s', '1m', '1h', '1d', or a calendar window such as { calendar: 'day', timeZone: 'Europe/Paris' }.`,
    ],
  ])('refuses %s at bootstrap', (_, window, message) => {
    expect(() => compile({ window } as Partial<RateLimitPolicy>)).toThrow(new RateLimitConfigError(message));
  });

  it('refuses a calendar window on another algorithm, at bootstrap or when a function returns one', () => {
    const message = `@RateLimit on C.h: window: a calendar window is for 'fixed-window' only; 'sliding-window' takes a duration such as '1d' (a number of ms or '250ms', '1s', '1m', '1h', '1d').`;
    expect(() => compile({ algorithm: 'sliding-window', window: { calendar: 'day' } })).toThrow(new RateLimitConfigError(message));
    const dynamic = compile({ algorithm: 'sliding-window', window: () => ({ calendar: 'day' }) });
    expect(() => resolveParams(dynamic, 10, { calendar: 'day' }, '@RateLimit on C.h')).toThrow(new RateLimitConfigError(message));
  });

  it('accepts what Intl accepts: aliases and any letter case', () => {
    const windows = new CalendarWindows();
    const at = 1772985600 * S;
    const canonical = windows.around({ calendar: 'day', timeZone: 'Asia/Kolkata' }, at, 'window').starts;
    expect(windows.around({ calendar: 'day', timeZone: 'asia/calcutta' }, at, 'window').starts).toEqual(canonical);
    expect(windows.around({ calendar: 'day', timeZone: 'Etc/UTC' }, at, 'window').starts[1]).toBe(Date.UTC(2026, 2, 8));
  });

  it('works out a static calendar window at each read of staticParams, for the current period', () => {
    const compiled = compile({ window: { calendar: 'day' } });
    const now = Date.now();
    const params = compiled.staticParams!;
    expect(params.periods!.startAt(now)).toBe(now - (now % D));
    expect(params.windowMs).toBe(D);
  });
});

describe('the calendar cache', () => {
  let formatted = 0;
  const original = Intl.DateTimeFormat.prototype.formatToParts;
  beforeEach(() => {
    formatted = 0;
    Intl.DateTimeFormat.prototype.formatToParts = function (this: Intl.DateTimeFormat, date?: Date | number) {
      formatted++;
      return original.call(this, date);
    };
  });
  afterEach(() => {
    Intl.DateTimeFormat.prototype.formatToParts = original;
  });

  it('does no Intl work while now stays in the period it computed', () => {
    const windows = new CalendarWindows();
    const paris = { calendar: 'day', timeZone: 'Europe/Paris' } as const;
    const first = windows.around(paris, 1772985600 * S, 'window');
    expect(formatted).toBeGreaterThan(0);
    formatted = 0;
    expect(windows.around(paris, 1772985600 * S + H, 'window')).toBe(first);
    expect(first.params(5, 5)).toBe(first.params(5, 5));
    expect(formatted).toBe(0);
  });

  it('remembers at most 1024 periods, the least recently used going first', () => {
    const windows = new CalendarWindows();
    const at = 1772985600 * S;
    const keys = Intl.supportedValuesOf('timeZone').flatMap((timeZone) =>
      (['day', 'week', 'month'] as const).map((calendar) => ({ calendar, timeZone })),
    );
    expect(keys.length).toBeGreaterThan(1024);
    for (const window of keys) windows.around(window, at, 'window');
    formatted = 0;
    for (const window of keys.slice(-1024)) windows.around(window, at, 'window');
    expect(formatted).toBe(0);
    windows.around(keys[0], at, 'window');
    expect(formatted).toBeGreaterThan(0);
  });

  it('builds one formatter per zone whatever letter case clients spell it in', () => {
    const Original = Intl.DateTimeFormat;
    let created = 0;
    Intl.DateTimeFormat = class extends Original {
      constructor(...args: ConstructorParameters<typeof Intl.DateTimeFormat>) {
        super(...args);
        created++;
      }
    } as typeof Intl.DateTimeFormat;
    try {
      const windows = new CalendarWindows();
      const at = 1772985600 * S;
      // 2000 spellings of one zone: bit i of n uppercases the i-th letter of 'comodrivadavia'.
      const spellings = Array.from(
        { length: 2000 },
        (_, n) => `America/Argentina/${[...'comodrivadavia'].map((c, i) => (n & (1 << i) ? c.toUpperCase() : c)).join('')}`,
      );
      const starts = spellings.map((timeZone) => windows.around({ calendar: 'week', timeZone }, at, 'window').starts);
      expect(created).toBe(1);
      expect(new Set(starts)).toEqual(new Set([starts[0]]));
    } finally {
      Intl.DateTimeFormat = Original;
    }
  });
});
