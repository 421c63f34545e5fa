import { Injectable, Optional, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimitConfigError } from './errors/rate-limit-config.error';
import type { RateLimitOverride, RateLimitOverrideEntry, RateLimitOverrideOptions } from './interfaces/override.interface';
import type { Duration, RateLimitPolicy } from './interfaces/policy.interface';
import type { RateLimitDenial } from './pipeline/deny-list';
import type { CompiledPolicy } from './policy/compile-policy';
import { parseDuration } from './policy/duration';
import { assertOverrideFits, assertPolicyName, assertTrackerPattern, overrideNumbers } from './policy/runtime-overrides';
import { RateLimitRouteRegistry } from './routes/route-registry';
import { describeValue } from './shared/describe-value';
import { ServiceCalls } from './service/service-calls';

export type { RateLimitDenial } from './pipeline/deny-list';

/**
 * Administration of limits, for operators, runbooks and admin routes: reset a quota, lock a tracker out of a
 * policy, deny a tracker everywhere, change a policy's numbers for some trackers at runtime (overrides). Every
 * change is made in the store, so it holds on every instance.
 *
 * Keys name trackers as in {@link RateLimiterService}: `ip:<address>`, `user:<id>`, `by:<value>` (or any other
 * string, the tracker of a `by` function returning it).
 * @example constructor(private readonly admin: RateLimitAdmin) {} … await admin.deny('ip:203.0.113.7', '1h', 'abuse');
 */
@Injectable()
export class RateLimitAdmin implements OnApplicationShutdown {
  /**
   * @param calls what the programmatic injectables share.
   * @param routes every route's policies (given by the module), the names overrides may use besides those
   *   the programmatic injectables were called with.
   */
  constructor(
    private readonly calls: ServiceCalls,
    @Optional() private readonly routes?: RateLimitRouteRegistry,
  ) {}

  /**
   * Overrides policy `policy`'s numbers for `tracker`, on every instance, while the app runs: a customer's plan,
   * an incident's clamp. Fields of `override` left out keep the policy's. `policy` is a policy's `name` (module
   * `defaultPolicy` and route policies, and those used with `RateLimiterService`); `tracker` is a tracker as the
   * policy sees it — what its `by` function returns (`'acme'`, or written out `'by:acme'`), or a built-in one
   * (`'ip:203.0.113.7'`, `'user:42'`) — a prefix ending in `*` (`'gold-*'`), or `'*'` (every tracker). The most
   * specific override wins: the exact tracker, then the longest prefix, then `'*'`, then the policy as written.
   * A limit or window the policy computes with a function is replaced (the function is not called for the
   * trackers it matches). Kept in the store (Redis: shared, and kept across restarts) until removed or until
   * `until` (the store's clock); applied on this instance at once, on the others within 1 s, with no store round
   * trip per request. What is already counted carries over (see docs/overrides.md).
   * Rejects with a {@link RateLimitConfigError} naming the field and the value for an unknown policy, a limit or
   * burst that is not a whole number ≥ 1, a burst on an algorithm without one, a window on a calendar window, a
   * capacity below the policy's fixed cost, or an `until` not in the future.
   * @example await admin.setOverride('api', 'acme', { limit: 5000 }); // acme's plan: 5,000 per window
   * @example await admin.setOverride('api', 'gold-*', { limit: 400 }, { until: new Date('2030-01-01') });
   */
  async setOverride(policy: string, tracker: string, override: RateLimitOverride, options?: RateLimitOverrideOptions): Promise<void> {
    this.calls.assertOpen();
    assertPolicyName(policy, 'setOverride');
    assertTrackerPattern(tracker, 'setOverride');
    const numbers = overrideNumbers(override, 'setOverride');
    assertOverrideFits(numbers, policy, this.policiesNamed(policy), 'setOverride');
    const until = untilOf(options?.until);
    await this.calls.engine.overrides.set(policy, this.calls.overridePattern(tracker), tracker, override, until);
    this.calls.assertOpen();
  }

  /**
   * Removes the override of `policy` for `tracker` (as {@link setOverride} was given it; `'acme'` and `'by:acme'`
   * name the same one): the policy applies as written again, here at once and on the others within 1 s. Resolves
   * also when there was none.
   */
  async removeOverride(policy: string, tracker: string): Promise<void> {
    this.calls.assertOpen();
    assertPolicyName(policy, 'removeOverride');
    assertTrackerPattern(tracker, 'removeOverride');
    await this.calls.engine.overrides.remove(policy, this.calls.overridePattern(tracker));
    this.calls.assertOpen();
  }

  /**
   * The overrides in force (of `policy` only, when given), as the store has them now: each with its tracker
   * pattern and override as set, and its end (`until`, ms on the store's clock) when it has one.
   */
  async listOverrides(policy?: string): Promise<RateLimitOverrideEntry[]> {
    this.calls.assertOpen();
    if (policy !== undefined) assertPolicyName(policy, 'listOverrides');
    const listed = await this.calls.engine.overrides.list();
    this.calls.assertOpen();
    return policy === undefined ? listed : listed.filter((entry) => entry.policy === policy);
  }

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
   * `reason` (at most 256 characters) is kept with it for {@link denied}; clients never see it. On Redis, every
   * instance holds every deny in force and answers it without a store round trip: this one at once, the others
   * within 1 s (their next poll). At most 100,000 denies are in force at once: beyond, denying another tracker
   * rejects with a {@link RateLimitConfigError}.
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

  /** Every policy named `name` this app knows; none is a {@link RateLimitConfigError} listing the names it knows. */
  private policiesNamed(name: string): CompiledPolicy[] {
    const policies = this.routes?.policiesNamed(name) ?? [];
    const used = this.calls.policyNamed(name);
    if (used !== undefined) policies.push(used);
    if (policies.length > 0) return policies;
    const known = [...new Set(this.routes?.policyNames() ?? [])].sort();
    const listed =
      known.length === 0
        ? 'none yet'
        : known
            .slice(0, 20)
            .map((n) => `'${n}'`)
            .join(', ') + (known.length > 20 ? ', …' : '');
    throw new RateLimitConfigError(
      `setOverride: policy: '${name}' names no policy of this app (its policies: ${listed}); give the name of a defaultPolicy or route policy, or of one RateLimiterService has been called with.`,
    );
  }
}

/** An override's end: a `Date` or ms since the epoch, on the store's clock (the store checks it is in the future). */
function untilOf(until: Date | number | undefined): number | undefined {
  if (until === undefined) return undefined;
  const ms = until instanceof Date ? until.getTime() : until;
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) {
    throw new RateLimitConfigError(
      `setOverride: until: ${until instanceof Date ? String(until) : describeValue(until)} is not a valid date; give a Date, or ms since the epoch (on the store's clock), in the future.`,
    );
  }
  return Math.ceil(ms);
}
