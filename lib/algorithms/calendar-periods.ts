import { RateLimitStoreError } from '../errors/rate-limit-store.error';

/** The params of a calendar window: an `AlgorithmParams`, declared here so the two files do not import each other. */
export interface CalendarParams {
  limit: number;
  windowMs: number;
  burst: number;
  periods: CalendarPeriods;
}

/**
 * Four consecutive period starts `b0 < b1 < b2 < b3` of one calendar window (in ms), computed around an
 * instant of this host's clock that lies in `[b1, b2)`. The store picks the period holding its own now
 * (`[b0, b1)`, `[b1, b2)` or `[b2, b3)`), so a store whose clock is a little ahead or behind still counts in
 * the right period; the period's start is the window id, the next start its end.
 */
export class CalendarPeriods {
  /** `[b0,b1,b2,b3]`, as the Redis script reads a calendar window (see `fixed-window.lua`). */
  readonly json: string;
  private memo: CalendarParams | undefined;

  /**
   * @param starts the four period starts, ascending.
   * @param recompute the periods of the same calendar window around another instant.
   */
  constructor(
    readonly starts: readonly [number, number, number, number],
    private readonly recompute: (nowMs: number) => CalendarPeriods,
  ) {
    this.json = `[${starts.join(',')}]`;
  }

  /** Whether one of the three periods holds `nowMs`. */
  holds(nowMs: number): boolean {
    return nowMs >= this.starts[0] && nowMs < this.starts[3];
  }

  /**
   * The start of the period holding `nowMs` (the window id); as `fixed-window.lua` does, a store error when
   * none does: the store's clock is a whole period away from the clock the periods were computed on.
   */
  startAt(nowMs: number): number {
    const [b0, b1, b2, b3] = this.starts;
    if (nowMs < b0 || nowMs >= b3) {
      throw new RateLimitStoreError(
        `calendar window: the store's clock (${nowMs} ms) is outside the periods computed on this host (${b0} to ${b3} ms): the clocks differ by more than a period.`,
        { outage: false },
      );
    }
    return nowMs < b1 ? b0 : nowMs < b2 ? b1 : b2;
  }

  /** The end of the period starting at `start` (one of the first three starts). */
  endOf(start: number): number {
    return this.starts[this.starts.indexOf(start) + 1];
  }

  /**
   * The algorithm's params: `windowMs` is the current period's length (`b2 - b1`: 23 h on a spring-forward
   * day, 28 days in a February), which the `RateLimit-Policy` header states as `w`. Remembered for the last
   * limit and burst asked, so a fixed policy allocates nothing per request.
   */
  params(limit: number, burst: number): CalendarParams {
    const memo = this.memo;
    if (memo !== undefined && memo.limit === limit && memo.burst === burst) return memo;
    return (this.memo = { limit, windowMs: this.starts[2] - this.starts[1], burst, periods: this });
  }

  /** The periods of the same calendar window around `nowMs` (this object itself while it holds `nowMs` in `[b1, b2)`). */
  around(nowMs: number): CalendarPeriods {
    return nowMs >= this.starts[1] && nowMs < this.starts[2] ? this : this.recompute(nowMs);
  }
}
