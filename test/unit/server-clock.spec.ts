/**
 * ServerClock: a one-policy fixed-window decision that read no clock gets the server's now back from its window
 * (the window's end is the multiple of the window nearest to the estimate plus the reset), exactly while the
 * estimate is within half a window; one that read the clock is taken as it is and learnt from.
 */
import { ServerClock } from '../../lib/stores/redis/server-clock';
import type { StoreDecision } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';

const WINDOW = 60_000;

function decision(nowMs: number, resetMs: number): StoreDecision {
  const verdict = { allowed: true, remaining: 1, resetMs, retryAfterMs: 0, delayMs: 0, moreQuotaMs: resetMs, reason: Verdict.Allowed };
  return { nowMs, allowed: true, verdicts: [verdict] };
}

describe('ServerClock', () => {
  let local: number;
  beforeEach(() => {
    local = 1_800_000_000_123;
    jest.spyOn(performance, 'now').mockImplementation(() => local - performance.timeOrigin);
  });
  afterEach(() => jest.restoreAllMocks());

  test('a decision that read the clock keeps it, and sets the offset later estimates start from', () => {
    const clock = new ServerClock();
    expect(clock.complete(decision(1_800_000_020_000, 5), WINDOW).nowMs).toBe(1_800_000_020_000);
    // The server runs 19,877 ms ahead of this host; 2 s later a decision whose window ends in 37,500 ms:
    local += 2_000;
    const end = Math.round((1_800_000_022_000 + 37_500) / WINDOW) * WINDOW;
    expect(clock.complete(decision(0, 37_500), WINDOW).nowMs).toBe(end - 37_500);
  });

  test.each([-29_000, -1_000, 0, 1_000, 29_000])('an estimate %i ms off still finds the server now exactly', (error) => {
    const clock = new ServerClock();
    const server = 1_800_000_040_000 + 777; // 20,777 ms into the window [1_800_000_040_000 − 20_000 …)
    clock.complete(decision(local, 1), WINDOW); // offset 0
    local = server + error;
    const end = (Math.floor(server / WINDOW) + 1) * WINDOW;
    expect(clock.complete(decision(0, end - server), WINDOW).nowMs).toBe(server);
  });

  test('with no reset to go by (nothing counted), the estimate itself', () => {
    const clock = new ServerClock();
    clock.complete(decision(local + 250, 1), WINDOW);
    local += 10;
    expect(clock.complete(decision(0, 0), WINDOW).nowMs).toBe(1_800_000_000_383);
  });
});
