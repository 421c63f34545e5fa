import { Inject, Injectable, type BeforeApplicationShutdown, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimitConfigError } from './errors/rate-limit-config.error';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import type { Duration, RateLimitPolicy } from './interfaces/policy.interface';
import type { AcquireOptions, PartnerPauseOptions, WrapFetchOptions } from './interfaces/service.interface';
import type { PolicyRequest } from './pipeline/rate-limit.engine';
import type { CompiledPolicy } from './policy/compile-policy';
import { parseDuration } from './policy/duration';
import { RATE_LIMIT_OPTIONS } from './rate-limit.module-definition';
import { describeValue } from './shared/describe-value';
import { AcquireTurns } from './service/acquire-turns';
import { obeyPartner, PartnerPauseFailures } from './service/partner-fetch';
import { DEFAULT_MAX_PAUSE_MS, pauseAskedMs, type PartnerResponse } from './service/partner-response';
import { assertKey, ServiceCalls } from './service/service-calls';
import type { AcquireTurn } from './service/acquire-turns';
import { paceOf, RateLimitWaiters } from './service/waiters';

/**
 * Outbound throttling: calls this app makes to a partner's API, paced under a policy shared by every instance
 * through the store, and paused when the partner says so. Keys are trackers as in {@link RateLimiterService}
 * (for a partner, any name: `'partner-api'` is the tracker `by:partner-api`).
 * @example
 * const partnerFetch = outbound.wrapFetch(partnerPolicy, 'partner-api', fetch, { maxWaitMs: 10_000 });
 */
@Injectable()
export class RateLimitOutbound implements BeforeApplicationShutdown, OnApplicationShutdown {
  /** The calls waiting in `acquire`, one first-come-first-served queue per counter. */
  private readonly waiters: RateLimitWaiters;
  private readonly pauseFailures: PartnerPauseFailures;
  /** The turns of recent `acquire` calls, shared by the calls on one policy + key + cost. */
  private readonly turns = new AcquireTurns((compiled, key, cost) => this.newTurn(compiled, key, cost));

  constructor(
    private readonly calls: ServiceCalls,
    @Inject(RATE_LIMIT_OPTIONS) options: RateLimitModuleOptions,
  ) {
    this.waiters = new RateLimitWaiters(options.maxWaiters);
    this.pauseFailures = new PartnerPauseFailures(options.storeErrorLogIntervalMs ?? 10_000, options.hooks?.storeError);
  }

  /**
   * Waits until `key` may proceed under `policy`, then takes the quota and resolves with the decision:
   * outbound throttling, shared by every instance through the store. Calls of this process on the same
   * policy + key wait in line, first come first served, and only the first asks the store (so each process
   * has one caller contending for the quota); at most `maxWaiters` wait at once. Rejects with `RateLimitWaitError` as
   * soon as its turn cannot come within `maxWaitMs` (the retry time the store gives, then the policy's pace
   * for the calls ahead of it), when the line is full, or when `signal` aborts. With `leaky-bucket` the slot
   * is reserved at once and the call waits exactly its `delayMs` (a slot past `maxWaitMs` is given back).
   */
  acquire(policy: RateLimitPolicy, key: string, options: AcquireOptions = {}): Promise<RateLimitDecision> {
    // Not async: a burst refuses thousands of calls in one turn, and the waiters' own promise is all they need.
    // Bad input still rejects the promise, as it would from an async method.
    try {
      return this.waiters.acquire(this.turn(policy, key, options.cost), options);
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  /**
   * Wraps `fn` so that every call first waits for its turn (see {@link acquire}).
   * @example const callPartner = outbound.wrap(partnerPolicy, 'partner-api', (id: string) => http.get(id));
   */
  wrap<A extends unknown[], R>(
    policy: RateLimitPolicy,
    key: string,
    fn: (...args: A) => Promise<R> | R,
    options: AcquireOptions = {},
  ): (...args: A) => Promise<R> {
    return async (...args: A) => {
      await this.acquire(policy, key, options);
      return fn(...args);
    };
  }

  /** Calls of this process waiting in `acquire` for `key` under `policy` now (for metrics and health checks). */
  waiting(policy: RateLimitPolicy, key: string): number {
    return this.waiters.waiting(this.calls.keysOf(policy, key).stateKey);
  }

  /**
   * Pauses `key` under `policy` on every instance: each `consume`, `acquire` and `wrap` call is rejected until
   * then (`retryAfterMs` counts to the pause's end on the store's clock), so `acquire` waits for it, or rejects
   * at once when it ends after `maxWaitMs`. `until` is a duration from now, or a date on the store's clock.
   * Built on the lockout of `RateLimitAdmin.block`: a longer pause in force is never shortened. Resolves with the
   * pause applied, ms (0 for a date already past: nothing is paused).
   * @example await outbound.pause(partnerPolicy, 'partner-api', '30s'); // the partner said so
   */
  async pause(policy: RateLimitPolicy, key: string, until: Duration | Date): Promise<number> {
    const ms = until instanceof Date ? await this.msUntil(policy, key, until) : parseDuration(until, 'pause: until');
    if (ms > 0) await this.calls.block(policy, key, ms);
    return ms;
  }

  /**
   * Pauses `key` under `policy` for as long as a partner's response asks (see {@link pause}), and resolves
   * with the pause applied, ms: 0 when the response does not ask for one. Takes fetch's `Response` or any
   * `{ status, headers }` (axios, got, undici; `headers` a `Headers` or a plain object) and reads, first
   * found first: `Retry-After` on a 429 or 503 (seconds, or an HTTP-date), the IETF `RateLimit` field (the
   * longest `t` of the policies with `r=0`), then `X-RateLimit-Remaining: 0` with `X-RateLimit-Reset`
   * (seconds, or an epoch timestamp from 1e9 on). A pause longer than `maxPause` (default 1 day) is cut to it.
   * @example
   * const res = await fetch(url);
   * await outbound.pauseFromResponse(partnerPolicy, 'partner-api', res);
   */
  async pauseFromResponse(
    policy: RateLimitPolicy,
    key: string,
    response: PartnerResponse,
    options: PartnerPauseOptions = {},
  ): Promise<number> {
    const ms = pauseAskedMs(response, maxPauseMs(options.maxPause));
    return ms > 0 ? this.pause(policy, key, ms) : 0;
  }

  /**
   * `fn` (fetch, or any function resolving to a `{ status, headers }` response) throttled under `policy` and
   * listening to the partner: every call waits for its turn (see {@link acquire}), and a response that asks
   * to wait (see {@link pauseFromResponse}) pauses `key` on every instance — also the `response` of an error
   * (axios and got throw for a 429). The caller still gets the response, or the error; a pause the store
   * could not record is logged and passed to `hooks.storeError`.
   * @example
   * const partnerFetch = outbound.wrapFetch(partnerPolicy, 'partner-api', fetch, { maxWaitMs: 10_000 });
   * const res = await partnerFetch('https://partner.example/quotes/42');
   */
  wrapFetch<A extends unknown[], R extends PartnerResponse>(
    policy: RateLimitPolicy,
    key: string,
    fn: (...args: A) => Promise<R>,
    options: WrapFetchOptions = {},
  ): (...args: A) => Promise<R> {
    // Checked now: a bad maxPause must not surface later as a pause the store failed to record.
    const pauseOptions = { maxPause: maxPauseMs(options.maxPause) };
    return obeyPartner(fn, {
      acquire: () => this.acquire(policy, key, options),
      pause: (response) => this.pauseFromResponse(policy, key, response, pauseOptions),
      pauseFailed: (error) => this.pauseFailures.report(error),
    });
  }

  /**
   * Called by Nest when the app begins to close, before the HTTP server stops: every pending `acquire()` wait
   * ends at once with `RateLimitShutdownError` (so a request waiting in one does not hold the close up), and no
   * new wait starts. Decisions that need no wait are still made: the store is open until
   * {@link onApplicationShutdown}.
   */
  beforeApplicationShutdown(): void {
    this.waiters.shutdown();
  }

  /** Called by Nest before the module closes the store: from now on every call rejects with `RateLimitShutdownError`. */
  onApplicationShutdown(): void {
    this.beforeApplicationShutdown();
    this.calls.close();
  }

  /**
   * One `acquire` call's turn for the waiters, checked as every call is (key, shutdown, policy, cost), and
   * shared by the calls on the same policy + key + cost (see {@link AcquireTurns}).
   */
  private turn(policy: RateLimitPolicy, key: string, cost: number | undefined): AcquireTurn {
    assertKey(key);
    const compiled = this.calls.staticPolicy(policy);
    return this.turns.get(compiled, key, this.calls.units(compiled, cost));
  }

  /** A turn: its counter, its pace, and the store decision that takes its quota. */
  private newTurn(compiled: CompiledPolicy, key: string, cost: number): AcquireTurn {
    const { engine } = this.calls;
    const known = this.calls.serviceKey(key);
    const { keys } = known;
    const params = compiled.staticParams!;
    const request: PolicyRequest = { compiled, params, cost };
    return {
      queueKey: engine.calls(keys, [{ ...request, token: '' }])[0].stateKey,
      key,
      policy: compiled.name,
      cost,
      pace: paceOf(compiled.algorithm.name, params.limit, params.windowMs),
      take: async () => {
        const { decisions, calls } = await engine.decide(keys, [this.calls.overridden(request, known)], 'consume');
        this.calls.assertOpen();
        return { decision: decisions[0], giveBack: () => engine.refund(calls) };
      },
    };
  }

  /** ms from the store's now until `date` (one peek: a pause's end is on the store's clock); 0 once it has passed. */
  private async msUntil(policy: RateLimitPolicy, key: string, date: Date): Promise<number> {
    const at = date.getTime();
    if (!Number.isFinite(at)) throw new RateLimitConfigError(`pause: until: ${describeValue(date)} is not a valid date.`);
    const { nowMs } = await this.calls.engine.store.decide([this.calls.keysOf(policy, key)], 'peek');
    this.calls.assertOpen();
    return Math.max(0, Math.ceil(at - nowMs));
  }
}

/** `maxPause` in ms (see {@link PartnerPauseOptions}). */
function maxPauseMs(maxPause: Duration | undefined): number {
  return maxPause === undefined ? DEFAULT_MAX_PAUSE_MS : parseDuration(maxPause, 'maxPause');
}
