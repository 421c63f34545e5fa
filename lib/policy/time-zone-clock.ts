const HOUR = 3_600_000;
/** UTC offsets in use lie within −12 h and +14 h: an instant this far either side of a wall reading brackets it. */
const SPAN = 18 * HOUR;

/**
 * The wall clock of one IANA time zone, read with `Intl.DateTimeFormat` (no dependency, the runtime's own
 * tz database). A wall reading is expressed as the UTC instant that would read the same, in ms, so that
 * calendar arithmetic is `Date.UTC` arithmetic.
 */
export class TimeZoneClock {
  private constructor(
    /** The zone as Intl resolves it (`'asia/calcutta'` is `'Asia/Calcutta'`). */
    readonly name: string,
    private readonly format: Intl.DateTimeFormat,
  ) {}

  /** The clock of zone `name`; `undefined` when the runtime does not know that zone. */
  static of(name: string): TimeZoneClock | undefined {
    let format: Intl.DateTimeFormat;
    try {
      format = new Intl.DateTimeFormat('en-US', {
        timeZone: name,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch {
      return undefined;
    }
    return new TimeZoneClock(format.resolvedOptions().timeZone, format);
  }

  /** What the zone's clocks read at instant `t` (ms), as a UTC instant: `t` plus the zone's offset at `t`. */
  wall(t: number): number {
    let year = 0;
    let month = 0;
    let day = 0;
    let hour = 0;
    let minute = 0;
    let second = 0;
    for (const { type, value } of this.format.formatToParts(t)) {
      if (type === 'year') year = Number(value);
      else if (type === 'month') month = Number(value);
      else if (type === 'day') day = Number(value);
      else if (type === 'hour') hour = Number(value);
      else if (type === 'minute') minute = Number(value);
      else if (type === 'second') second = Number(value);
    }
    // Intl reads whole seconds; offsets are whole seconds too, so the milliseconds carry over unchanged.
    return Date.UTC(year, month - 1, day, hour, minute, second) + (t - Math.floor(t / 1000) * 1000);
  }
}

/**
 * The first instant at which `zone`'s clocks read `wall` or later: the instant of that wall time, or, when
 * the clocks jumped over it (a DST change at midnight), the instant they jumped. Assumes the clocks never go
 * back across `wall` after first reading it (no zone's transitions do, around midnight or the 1st).
 */
export function startOfWall(zone: TimeZoneClock, wall: number): number {
  // Usually the offset at the first guess is the answer's: three readings in all.
  let t = wall - (zone.wall(wall) - wall);
  for (let i = 0; i < 3; i++) {
    const reading = zone.wall(t);
    if (reading === wall) {
      if (zone.wall(t - 1) < wall) return t;
      break; // read a second time, after the clocks went back: the first reading is earlier
    }
    t = wall - (reading - t);
  }
  let before = wall - SPAN;
  let after = wall + SPAN;
  while (after - before > 1) {
    const mid = Math.floor((before + after) / 2);
    if (zone.wall(mid) >= wall) after = mid;
    else before = mid;
  }
  return after;
}
