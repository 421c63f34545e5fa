import type { Duration } from '../interfaces/policy.interface';
import { parseDuration } from '../policy/duration';

/**
 * Where a {@link RateLimitTestClock} starts: 2025-01-01T00:00:00.000Z, a whole number of every second,
 * minute, hour and day, so fixed windows begin exactly at the start and `Retry-After` values are round.
 */
export const RATE_LIMIT_TEST_START = Date.UTC(2025, 0, 1);

/**
 * The controllable clock of the testing kit: time stands still until you move it. Get it from a testing module
 * that imports `RateLimitTestingModule.forRoot` (`app.get(RateLimitTestClock)`), or create one and pass it to
 * `RateLimitTestingModule.override` to test your `AppModule`; call {@link advance} to cross windows, refill
 * buckets or end lockouts without waiting. Only the store's time is fake: `leaky-bucket` delays and
 * `acquire` waits still sleep.
 * @example
 * const clock = new RateLimitTestClock(); // 2025-01-01T00:00:00Z
 * clock.advance('1m'); // the next fixed window
 */
export class RateLimitTestClock {
  private nowMs: number;

  /** @param startAt ms since the epoch. @default RATE_LIMIT_TEST_START */
  constructor(startAt: number = RATE_LIMIT_TEST_START) {
    this.nowMs = checkTime(startAt, 'startAt');
  }

  /** The current time, ms since the epoch (a `RateLimitClock`: safe to pass around unbound). */
  readonly now = (): number => this.nowMs;

  /**
   * Moves time forward by `by` (ms, or a duration string such as `'30s'`, `'1m'`); returns the new time.
   * @example clock.advance(500); clock.advance('1h');
   */
  advance(by: Duration): number {
    const ms = by === 0 ? 0 : parseDuration(by, 'RateLimitTestClock.advance');
    this.nowMs += ms;
    return this.nowMs;
  }

  /** Sets the time, ms since the epoch (it may go back, to test a clock that steps back). */
  set(ms: number): void {
    this.nowMs = checkTime(ms, 'RateLimitTestClock.set');
  }
}

function checkTime(ms: number, what: string): number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
    throw new Error(
      `${what}: ${String(ms)} is not a time; pass milliseconds since the epoch (a finite number ≥ 0), e.g. Date.UTC(2025, 0, 1).`,
    );
  }
  return ms;
}
