import { Inject, Injectable, Optional, type BeforeApplicationShutdown, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import type { RateLimitOverride, RateLimitOverrideEntry, RateLimitOverrideOptions } from './interfaces/override.interface';
import type { Duration, RateLimitPolicy } from './interfaces/policy.interface';
import type {
  AcquireOptions,
  ConsumeOptions,
  LeaseOptions,
  MultiDecision,
  PartnerPauseOptions,
  RateLimitLease,
  WrapFetchOptions,
} from './interfaces/service.interface';
import type { RateLimitDenial } from './pipeline/deny-list';
import { RateLimitEngine } from './pipeline/rate-limit.engine';
import { RateLimitAdmin } from './rate-limit-admin.service';
import { RATE_LIMIT_OPTIONS } from './rate-limit.module-definition';
import { RateLimitOutbound } from './rate-limit-outbound.service';
import type { RateLimitAdaptivePolicy, RateLimitAdmission, RateLimitCriticality } from './interfaces/overload.interface';
import { AdaptiveAdmissions } from './service/adaptive-admissions';
import { RateLimitAdaptiveLimits } from './overload/adaptive-limits';
import type { PartnerResponse } from './service/partner-response';
import type { RateLimitReservation } from './service/reservation';
import { ServiceCalls } from './service/service-calls';
import { ServiceDecisions } from './service/service-decisions';

export type {
  AcquireOptions,
  ConsumeOptions,
  LeaseOptions,
  MultiDecision,
  RateLimitLease,
  WrapFetchOptions,
} from './interfaces/service.interface';

/**
 * Rate limiting without HTTP: jobs, queues, anything keyed by a string — take, peek, reserve, refund, penalise,
 * lease. Counters are shared with routes only through a policy `scope`. Administration (block, deny) is
 * {@link RateLimitAdmin}'s and outbound throttling (acquire, wrapFetch) {@link RateLimitOutbound}'s; the methods
 * of theirs this class still has are deprecated and delegate to them, but for the runtime overrides
 * (`setOverride`, `removeOverride`, `listOverrides`), which this class resolves too, as their contract says.
 *
 * Every method's `key` names a tracker: `ip:<address>` the client at that address (normalised as the guard
 * does), `user:<id>` a user, `by:<value>` (or any other string, such as `'acme'`) the tracker of a `by`
 * function returning that value. A bare IP address is refused: write `ip:` or `by:` before it.
 * @example const d = await limiter.consume({ algorithm: 'gcra', limit: 10, window: '1s' }, `user:${id}`);
 *
 * On shutdown (`app.close()`), pending `acquire()` waits end at once with {@link RateLimitShutdownError}, and
 * once the module closes its store every call rejects with it: nothing is decided, nor granted, after close.
 */
@Injectable()
export class RateLimiterService implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly calls: ServiceCalls;
  /** What the methods below decide, and how (see {@link ServiceDecisions}). */
  private readonly decisions: ServiceDecisions;
  private readonly admin: RateLimitAdmin;
  private readonly outbound: RateLimitOutbound;
  private readonly adaptive: AdaptiveAdmissions;

  /**
   * Built by the module, which shares its {@link ServiceCalls}, {@link RateLimitAdmin} and
   * {@link RateLimitOutbound} with it; built by hand (`new RateLimiterService(engine, registry, options)`), it
   * makes its own.
   */
  constructor(
    engine: RateLimitEngine,
    registry: RateLimitAlgorithmRegistry,
    @Inject(RATE_LIMIT_OPTIONS) options: RateLimitModuleOptions,
    @Optional() calls?: ServiceCalls,
    @Optional() admin?: RateLimitAdmin,
    @Optional() outbound?: RateLimitOutbound,
    @Optional() adaptiveLimits?: RateLimitAdaptiveLimits,
  ) {
    this.calls = calls ?? new ServiceCalls(engine, registry, options);
    this.decisions = new ServiceDecisions(this.calls);
    this.admin = admin ?? new RateLimitAdmin(this.calls);
    this.outbound = outbound ?? new RateLimitOutbound(this.calls, options);
    this.adaptive = new AdaptiveAdmissions(adaptiveLimits ?? new RateLimitAdaptiveLimits(options.hooks, options.nearLimitRatio));
  }

  /**
   * Takes `cost` units (default 1) from `key`'s quota under `policy`; a rejection takes nothing. A policy with a
   * `reserve` keeps its share for calls above `priority` (default `'default'`).
   * @example const d = await limiter.consume(exportsPolicy, tenantId, { priority: 'critical' });
   */
  consume(policy: RateLimitPolicy, key: string, options: ConsumeOptions = {}): Promise<RateLimitDecision> {
    return this.decisions.one(policy, key, options, 'consume');
  }

  /**
   * Takes from every policy atomically, in one store call: when any rejects, none is charged.
   * Policies must have distinct names.
   */
  consumeAll(policies: readonly RateLimitPolicy[], key: string, options: ConsumeOptions = {}): Promise<MultiDecision> {
    return this.decisions.all(policies, key, options);
  }

  /**
   * Reserve, then settle, for costs known only afterwards (LLM tokens, rows, bytes): takes `cost` units, an
   * estimate, from every policy atomically (all or none, as {@link consumeAll}); the reservation's
   * `settle(actual)` then gives back the difference, or charges an overdraft, in one atomic store call, and
   * `cancel()` gives the estimate back. Not for `concurrency` policies (use {@link lease}).
   * @example
   * const r = await limiter.reserve([tokensPerMinute, tokensPerDay], apiKey, { cost: maxTokens });
   * if (r.allowed) await r.settle((await complete(prompt, maxTokens)).usage.totalTokens);
   */
  reserve(
    policies: RateLimitPolicy | readonly RateLimitPolicy[],
    key: string,
    options: ConsumeOptions = {},
  ): Promise<RateLimitReservation> {
    return this.decisions.reserve(policies, key, options);
  }

  /** What `consume` would decide now, without taking anything. */
  peek(policy: RateLimitPolicy, key: string, options: ConsumeOptions = {}): Promise<RateLimitDecision> {
    return this.decisions.one(policy, key, options, 'peek');
  }

  /** Restores `key`'s full quota under `policy` and lifts any lockout (as `RateLimitAdmin.reset`). */
  reset(policy: RateLimitPolicy, key: string): Promise<void> {
    return this.admin.reset(policy, key);
  }

  /**
   * Gives back `cost` units taken earlier under `policy` (for outcomes that should not count): a whole number
   * from 1 to the policy's capacity (`burst` for the bucket algorithms, `limit` otherwise), since more can
   * never have been taken; other values reject with a RateLimitConfigError.
   */
  refund(policy: RateLimitPolicy, key: string, cost = 1): Promise<void> {
    return this.decisions.refund(policy, key, cost);
  }

  /**
   * Charges `cost` units to `key` under `policy` whatever its counter says (a penalty: a failed login, abuse
   * detected after the fact), atomically, in one store call; the counter may go past the limit, so the key
   * waits longer. Resolves with the decision after the charge, as a {@link peek} of one unit reports it:
   * `allowed` when one more unit fits now, else `retryAfterMs` until it does; `remaining` counts the penalty. `cost` is a whole number from 1 to the policy's
   * capacity (`burst` for the bucket algorithms, `limit` otherwise) — a larger penalty is a lockout, which
   * {@link block} expresses exactly; `concurrency` takes leases, not penalties.
   * @example await limiter.penalty(loginPolicy, username, 3);
   */
  penalty(policy: RateLimitPolicy, key: string, cost = 1): Promise<RateLimitDecision> {
    return this.decisions.penalty(policy, key, cost);
  }

  /**
   * Takes a `concurrency` lease for non-HTTP work. When allowed, `release()` frees the slot early;
   * otherwise `release()` does nothing. A lease never released expires after the policy's window; work that
   * may outlast it keeps it with `extend()`.
   * @example const lease = await limiter.lease(exportsPolicy, tenantId); try { … } finally { await lease.release(); }
   */
  lease(policy: RateLimitPolicy, key: string, options: LeaseOptions = {}): Promise<RateLimitLease> {
    return this.decisions.lease(policy, key, options);
  }

  /**
   * Admits one unit of work that is not a route to the adaptive limit `policy` (`algorithm: 'adaptive'`): a
   * limit on such work in flight in this process, one per policy name, that follows the work's measured
   * latency. Synchronous, no store involved. Release the admission when the work ends.
   * @example const a = limiter.admit({ algorithm: 'adaptive', name: 'pdf', limit: 16 }); if (a.decision.allowed) try { await render(); } finally { a.release(); }
   */
  admit(policy: RateLimitAdaptivePolicy, options: { priority?: RateLimitCriticality } = {}): RateLimitAdmission {
    return this.adaptive.admit(policy, options.priority);
  }

  /** As `RateLimitAdmin.setOverride`: changes `policy`'s numbers for `tracker` on every instance, at runtime. */
  setOverride(policy: string, tracker: string, override: RateLimitOverride, options?: RateLimitOverrideOptions): Promise<void> {
    return this.admin.setOverride(policy, tracker, override, options);
  }

  /** As `RateLimitAdmin.removeOverride`: `policy` applies to `tracker` as written again. */
  removeOverride(policy: string, tracker: string): Promise<void> {
    return this.admin.removeOverride(policy, tracker);
  }

  /** As `RateLimitAdmin.listOverrides`: the runtime overrides in force. */
  listOverrides(policy?: string): Promise<RateLimitOverrideEntry[]> {
    return this.admin.listOverrides(policy);
  }

  /** @deprecated since 1.0: use `RateLimitAdmin.block` (same arguments); removed in 2.0. */
  block(policy: RateLimitPolicy, key: string, duration: Duration): Promise<void> {
    return this.admin.block(policy, key, duration);
  }

  /** @deprecated since 1.0: use `RateLimitAdmin.unblock` (same arguments); removed in 2.0. */
  unblock(policy: RateLimitPolicy, key: string): Promise<void> {
    return this.admin.unblock(policy, key);
  }

  /** @deprecated since 1.0: use `RateLimitAdmin.deny` (same arguments); removed in 2.0. */
  deny(key: string, until: Duration | Date, reason?: string): Promise<void> {
    return this.admin.deny(key, until, reason);
  }

  /** @deprecated since 1.0: use `RateLimitAdmin.allow` (same arguments); removed in 2.0. */
  allow(key: string): Promise<void> {
    return this.admin.allow(key);
  }

  /** @deprecated since 1.0: use `RateLimitAdmin.denied` (same arguments); removed in 2.0. */
  denied(key: string): Promise<RateLimitDenial | undefined> {
    return this.admin.denied(key);
  }

  /** @deprecated since 1.0: use `RateLimitOutbound.acquire` (same arguments); removed in 2.0. */
  acquire(policy: RateLimitPolicy, key: string, options: AcquireOptions = {}): Promise<RateLimitDecision> {
    return this.outbound.acquire(policy, key, options);
  }

  /** @deprecated since 1.0: use `RateLimitOutbound.wrap` (same arguments); removed in 2.0. */
  wrap<A extends unknown[], R>(
    policy: RateLimitPolicy,
    key: string,
    fn: (...args: A) => Promise<R> | R,
    options: AcquireOptions = {},
  ): (...args: A) => Promise<R> {
    return this.outbound.wrap(policy, key, fn, options);
  }

  /** @deprecated since 1.0: use `RateLimitOutbound.waiting` (same arguments); removed in 2.0. */
  waiting(policy: RateLimitPolicy, key: string): number {
    return this.outbound.waiting(policy, key);
  }

  /** @deprecated since 1.0: use `RateLimitOutbound.pause` (same arguments); removed in 2.0. */
  pause(policy: RateLimitPolicy, key: string, until: Duration | Date): Promise<number> {
    return this.outbound.pause(policy, key, until);
  }

  /** @deprecated since 1.0: use `RateLimitOutbound.pauseFromResponse` (same arguments); removed in 2.0. */
  pauseFromResponse(policy: RateLimitPolicy, key: string, response: PartnerResponse, options: PartnerPauseOptions = {}): Promise<number> {
    return this.outbound.pauseFromResponse(policy, key, response, options);
  }

  /** @deprecated since 1.0: use `RateLimitOutbound.wrapFetch` (same arguments); removed in 2.0. */
  wrapFetch<A extends unknown[], R extends PartnerResponse>(
    policy: RateLimitPolicy,
    key: string,
    fn: (...args: A) => Promise<R>,
    options: WrapFetchOptions = {},
  ): (...args: A) => Promise<R> {
    return this.outbound.wrapFetch(policy, key, fn, options);
  }

  /**
   * Called by Nest when the app begins to close: pending `acquire()` waits end at once (see
   * `RateLimitOutbound.beforeApplicationShutdown`).
   */
  beforeApplicationShutdown(): void {
    this.outbound.beforeApplicationShutdown();
  }

  /**
   * Called by Nest before the module closes the store: from now on every call rejects with
   * {@link RateLimitShutdownError}, and so does a decision still in flight (a closed store's fallback must
   * not grant it).
   */
  onApplicationShutdown(): void {
    this.outbound.onApplicationShutdown();
  }
}
