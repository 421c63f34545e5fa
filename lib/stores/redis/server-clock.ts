import type { StoreDecision } from '../store.interface';

/**
 * The Redis server's clock as this instance last read it. A one-policy fixed-window decision reads no clock on
 * most hits (its counter's TTL is the rest of its window, see `needsClock` in redis-codec.ts) and replies now as
 * 0. Its `nowMs` is then found from its window: the window's end is the multiple of the window nearest to the
 * estimated now plus the reset, and now is that end minus the reset, exactly the server's reading while the
 * estimate (the last reading plus the local time since) is within half a window of it.
 */
export class ServerClock {
  /** The server's clock minus this host's, ms; `undefined` until a reply carried the clock. */
  private offset: number | undefined;

  /** `decision` of a window of `windowMs`, its `nowMs` found when the script did not read the clock, learnt from when it did. */
  complete(decision: StoreDecision, windowMs: number): StoreDecision {
    const local = performance.timeOrigin + performance.now();
    if (decision.nowMs > 0) {
      this.offset = decision.nowMs - local;
      return decision;
    }
    const estimate = local + (this.offset ?? 0);
    const reset = decision.verdicts[0].resetMs;
    decision.nowMs = reset > 0 ? Math.round((estimate + reset) / windowMs) * windowMs - reset : Math.floor(estimate);
    return decision;
  }
}
