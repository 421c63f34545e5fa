import { CalendarPeriods } from '../algorithms/calendar-periods';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { CalendarWindow, RateLimitAlgorithmName } from '../interfaces/policy.interface';
import { describeValue } from '../shared/describe-value';
import { LruMap } from '../shared/lru-map';
import { startOfWall, TimeZoneClock } from './time-zone-clock';

export { CalendarPeriods };

const UNITS: ReadonlySet<string> = new Set(['day', 'week', 'month']);
const FIELDS: ReadonlySet<string> = new Set(['calendar', 'timeZone', 'weekStartsOn']);
/**
 * What a time zone name may look like before Intl is asked (IANA names are at most 32 characters of these):
 * a zone may come from a client, so this bounds the cache keys and the work one string can cost.
 */
const ZONE_NAME = /^[A-Za-z0-9_+\-/]{1,64}$/;
/**
 * Zones, and current periods, remembered per policy; past it the least recently used are recomputed when next
 * asked. Above the ~600 names (zones and links) of the tz database, and names are compared without letter case
 * as Intl compares them: whatever clients send, each zone's formatter (about 10 KB of native memory, which
 * Node only gives back lazily) is built once per policy.
 */
const MAX_ENTRIES = 1024;
/** Most periods stepped over looking for a non-empty one (a zone that skipped a whole day, as Pacific/Apia in 2011). */
const MAX_STEPS = 8;

/** A calendar window as validated: what its periods depend on. */
interface CalendarSpec {
  unit: CalendarWindow['calendar'];
  weekStartsOn: number;
  zone: TimeZoneClock;
  /** `unit:weekStartsOn:zone`, the cache key. */
  key: string;
}

/**
 * The calendar windows of one policy: validates them and remembers, per time zone and kind of period, the
 * periods around now until now leaves the current one, so a request does no Intl work but once per period
 * and zone. Bounded in entries, and in bytes: a zone name that is not 1-64 of the characters IANA names use
 * is refused before Intl reads it.
 */
export class CalendarWindows {
  private readonly zones = new LruMap<TimeZoneClock>();
  private readonly current = new LruMap<CalendarPeriods>();

  /**
   * The periods of `window` around `nowMs`. Throws a {@link RateLimitConfigError} naming `field` when `window`
   * is not a calendar window: an unknown field or period, a `weekStartsOn` outside 0-6, a zone Intl does not know.
   * @example windows.around({ calendar: 'day', timeZone: 'Europe/Paris' }, Date.now(), 'window')
   */
  around(window: CalendarWindow, nowMs: number, field: string): CalendarPeriods {
    const { calendar, timeZone = 'UTC', weekStartsOn = 1 } = checkShape(window, field);
    const key = `${calendar}:${weekStartsOn}:${timeZone}`.toLowerCase();
    const cached = this.current.get(key, true);
    if (cached !== undefined) return cached.around(nowMs);
    const spec: CalendarSpec = { unit: calendar, weekStartsOn, zone: this.zone(timeZone, field), key };
    return this.compute(spec, nowMs);
  }

  private compute(spec: CalendarSpec, nowMs: number): CalendarPeriods {
    const periods = new CalendarPeriods(periodStarts(spec, nowMs), (at) => this.compute(spec, at));
    this.current.set(spec.key, periods);
    if (this.current.size > MAX_ENTRIES) this.current.delete(this.current.oldest()!);
    return periods;
  }

  private zone(name: string, field: string): TimeZoneClock {
    const key = name.toLowerCase();
    let zone = this.zones.get(key, true);
    if (zone === undefined) {
      zone = TimeZoneClock.of(name);
      if (zone === undefined) {
        throw new RateLimitConfigError(
          `${field}: timeZone ${describeValue(name)} is not a time zone this runtime knows; use an IANA name such as 'Europe/Paris' or 'America/New_York' (Intl.supportedValuesOf('timeZone') lists them), or 'UTC'.`,
        );
      }
      this.zones.set(key, zone);
      if (this.zones.size > MAX_ENTRIES) this.zones.delete(this.zones.oldest()!);
    }
    return zone;
  }
}

/** What a `fixed-window`'s window error offers besides a duration. */
export const CALENDAR_EXAMPLE = "a calendar window such as { calendar: 'day', timeZone: 'Europe/Paris' }";

/**
 * The calendar windows of a policy whose window is `window`: for a `fixed-window` whose window is a calendar
 * window (checked now, so a bad one fails at bootstrap) or a function (which may return one); `undefined` for
 * any other. A calendar window on another algorithm is a {@link RateLimitConfigError} naming `field`.
 */
export function calendarWindowsFor(window: unknown, algorithm: RateLimitAlgorithmName, field: string): CalendarWindows | undefined {
  if (typeof window === 'function') return algorithm === 'fixed-window' ? new CalendarWindows() : undefined;
  if (!isCalendarWindow(window)) return undefined;
  if (algorithm !== 'fixed-window') throw calendarNeedsFixedWindow(algorithm, field);
  const windows = new CalendarWindows();
  windows.around(window, Date.now(), field);
  return windows;
}

/** The error for a calendar window given to another algorithm than `fixed-window`. */
export function calendarNeedsFixedWindow(algorithm: string, field: string): RateLimitConfigError {
  return new RateLimitConfigError(
    `${field}: a calendar window is for 'fixed-window' only; '${algorithm}' takes a duration such as '1d' (a number of ms or '250ms', '1s', '1m', '1h', '1d').`,
  );
}

/** Whether a policy's window value is a calendar window (any object: {@link CalendarWindows} says what is wrong with it). */
export function isCalendarWindow(window: unknown): window is CalendarWindow {
  return typeof window === 'object' && window !== null;
}

/** `window` with its fields checked (not yet its zone, which needs Intl). */
function checkShape(window: CalendarWindow, field: string): Required<CalendarWindow> {
  const example = `such as { calendar: 'day', timeZone: 'Europe/Paris' }`;
  for (const key of Object.keys(window)) {
    if (!FIELDS.has(key))
      throw new RateLimitConfigError(
        `${field}: unknown calendar window field '${key}'; known fields are calendar, timeZone, weekStartsOn.`,
      );
  }
  const { calendar, timeZone = 'UTC', weekStartsOn = 1 } = window;
  if (!UNITS.has(calendar)) {
    throw new RateLimitConfigError(
      `${field}: calendar: ${describeValue(calendar)} must be one of 'day', 'week', 'month' (a calendar window ${example}).`,
    );
  }
  if (typeof timeZone !== 'string' || !ZONE_NAME.test(timeZone)) {
    throw new RateLimitConfigError(
      `${field}: timeZone: ${describeValue(typeof timeZone === 'string' ? timeZone.slice(0, 64) : timeZone)} must be an IANA time zone name such as 'Europe/Paris' (at most 64 letters, digits and _ + - /).`,
    );
  }
  if (!Number.isInteger(weekStartsOn) || weekStartsOn < 0 || weekStartsOn > 6) {
    throw new RateLimitConfigError(
      `${field}: weekStartsOn: ${describeValue(weekStartsOn)} must be a whole number from 0 (Sunday) to 6 (Saturday).`,
    );
  }
  return { calendar, timeZone, weekStartsOn };
}

/**
 * The starts of the period holding `nowMs` (`b1`), of the one before and of the two after, skipping empty
 * periods (a local date a zone skipped). A period starts at the first instant of its first local date: local
 * midnight, or when midnight does not exist that day (a DST change at midnight), the instant the clocks
 * jump to.
 */
function periodStarts({ unit, weekStartsOn, zone }: CalendarSpec, nowMs: number): [number, number, number, number] {
  const local = new Date(zone.wall(nowMs));
  const year = local.getUTCFullYear();
  const month = local.getUTCMonth();
  const day = local.getUTCDate();
  const firstDay = unit === 'week' ? day - ((local.getUTCDay() - weekStartsOn + 7) % 7) : day;
  // The local midnight that starts period k (0 = the one holding now's local date), as a wall-clock reading.
  const wallStart = (k: number) =>
    unit === 'month' ? Date.UTC(year, month + k, 1) : Date.UTC(year, month, firstDay + k * (unit === 'week' ? 7 : 1));
  const start = (k: number) => startOfWall(zone, wallStart(k));

  const lost = () =>
    new RateLimitStoreError(`calendar window: no period of a ${unit} in ${zone.name} holds ${nowMs} ms.`, { outage: false });
  let k1 = 0;
  let b1 = start(0);
  // Only a zone whose clocks went back across midnight could read a date whose first instant is still ahead.
  for (let steps = 0; b1 > nowMs; steps++) {
    if (steps === MAX_STEPS) throw lost();
    b1 = start(--k1);
  }
  let k2 = k1 + 1;
  let b2 = start(k2);
  for (let steps = 0; b2 <= nowMs || b2 === b1; steps++) {
    if (steps === MAX_STEPS) throw lost();
    if (b2 <= nowMs) {
      k1 = k2;
      b1 = b2;
    }
    b2 = start(++k2);
  }
  const b0 = nonEmpty(start, k1 - 1, -1, b1);
  const b3 = nonEmpty(start, k2 + 1, 1, b2);
  return [b0, b1, b2, b3];
}

/** The first start from period `k`, stepping by `step`, that differs from `than` (a skipped date makes an empty period). */
function nonEmpty(start: (k: number) => number, k: number, step: number, than: number): number {
  for (let steps = 0; steps < MAX_STEPS; steps++, k += step) {
    const b = start(k);
    if (b !== than) return b;
  }
  throw new RateLimitStoreError(`calendar window: ${MAX_STEPS} empty periods in a row.`, { outage: false });
}
