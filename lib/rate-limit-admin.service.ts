import { Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Duration, RateLimitPolicy } from './interfaces/policy.interface';
import type { RateLimitDenial } from './pipeline/deny-list';
import { parseDuration } from './policy/duration';
import { ServiceCalls } from './service/service-calls';

export type { RateLimitDenial } from './pipeline/deny-list';

/**
 * Administration of limits, for operators, runbooks and admin routes: reset a quota, lock a tracker out of a
 * policy, deny a tracker everywhere. Every change is made in the store, so it holds on every instance.
 *
 * Keys name trackers as in {@link RateLimiterService}: `ip:<address>`, `user:<id>`, `by:<value>` (or any other
 * string, the tracker of a `by` function returning it).
 * @example constructor(private readonly admin: RateLimitAdmin) {} … await admin.deny('ip:203.0.113.7', '1h', 'abuse');
 */
@Injectable()
export class RateLimitAdmin implements OnApplicationShutdown {
  constructor(private readonly calls: ServiceCalls) {}

  /** Restores `key`'s full quota under `policy` and lifts any lockout. */
  async reset(policy: RateLimitPolicy, key: string): Promise<void> {
    const call = this.calls.keysOf(policy, key);
    await this.calls.engine.store.delete([call.stateKey, call.blockKey]);
  }

  /**
   * Locks `key` out of `policy` for `duration` from now (the store's clock), whatever its counter says. Never
   * shortens a lockout in force: when one ends later, it stays as it is (to shorten one, {@link unblock} first).
   * With `escalate`, the tracker's offence count is kept, and this lockout does not add to it.
   */
  async block(policy: RateLimitPolicy, key: string, duration: Duration): Promise<void> {
    await this.calls.block(policy, key, parseDuration(duration, 'block duration'));
  }

  /**
   * Lifts a lockout of `key` under `policy`. Its counter is kept; with `escalate` its offence count is
   * forgotten (the next lockout is `blockFor` again), as after the quiet period.
   */
  async unblock(policy: RateLimitPolicy, key: string): Promise<void> {
    await this.calls.engine.store.delete([this.calls.keysOf(policy, key).blockKey]);
  }

  /**
   * Denies the tracker `key` (`ip:203.0.113.7`, `user:42`, or what a `by` function returns, such as an API key)
   * until `until` — a duration from now, or a date on the store's clock — on every policy of every route and
   * every service call, on every instance: each decision for it is rejected as a lockout (429 with
   * `Retry-After` until then). A deny in force that ends later is kept (to shorten one, {@link allow} first).
   * `reason` (at most 256 characters) is kept with it for {@link denied}; clients never see it. Each instance
   * answers a tracker it knows to be denied without a store round trip, and asks the store again each second.
   * @example await admin.deny('ip:203.0.113.7', '1h', 'credential stuffing');
   */
  async deny(key: string, until: Duration | Date, reason?: string): Promise<void> {
    await this.calls.engine.denials.deny(this.calls.denyKey(key), until, reason);
    this.calls.assertOpen();
  }

  /** Lifts the deny of tracker `key`: at once on this instance, within a second on the others. */
  async allow(key: string): Promise<void> {
    await this.calls.engine.denials.allow(this.calls.denyKey(key));
  }

  /** The deny of tracker `key` in force (its end on the store's clock, and its reason), or `undefined`. */
  async denied(key: string): Promise<RateLimitDenial | undefined> {
    const denial = await this.calls.engine.denials.denied(this.calls.denyKey(key));
    this.calls.assertOpen();
    return denial;
  }

  /** Called by Nest before the module closes the store: from now on every call rejects with `RateLimitShutdownError`. */
  onApplicationShutdown(): void {
    this.calls.close();
  }
}
