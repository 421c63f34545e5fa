import { Inject, Injectable, type BeforeApplicationShutdown, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
import { RateLimitConfigError } from './errors/rate-limit-config.error';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import type { Duration, RateLimitPolicy } from './interfaces/policy.interface';
import { RateLimitShutdownError } from './errors/rate-limit-wait.error';
import { parseDuration } from './policy/duration';
import { RateLimitEngine, type EngineDecision, type PolicyRequest } from './pipeline/rate-limit.engine';
import { MAX_POLICIES_PER_DECISION, type DecisionMode } from './stores/store.interface';
import { RATE_LIMIT_OPTIONS } from './rate-limit.module-definition';
import { compilePolicy, cost as validCost, type CompiledPolicy } from './policy/compile-policy';
import { trackerKeyPrefix } from './shared/keys';
import { describeValue } from './shared/describe-value';
import { penalizeIn } from './stores/store-health';
import type { RateLimitDenial } from './pipeline/deny-list';
import { StringMemo } from './shared/string-memo';
import { serviceTracker } from './http/tracker';
import { assertReservable, reservationOf, type RateLimitReservation } from './service/reservation';
import { leaseOf } from './service/lease';
import type { AcquireOptions, ConsumeOptions, MultiDecision, RateLimitLease, WrapFetchOptions } from './interfaces/service.interface';
import { PolicyCache } from './policy/policy-cache';
import { paceOf, RateLimitWaiters, type AcquireTurn } from './service/waiters';
import { AcquireTurns } from './service/acquire-turns';
import { DEFAULT_MAX_PAUSE_MS, pauseAskedMs, type PartnerPauseOptions, type PartnerResponse } from './service/partner-response';
import { obeyPartner, PartnerPauseFailures } from './service/partner-fetch';

export type { AcquireOptions, ConsumeOptions, MultiDecision, RateLimitLease, WrapFetchOptions } from './interfaces/service.interface';

/** Counters of programmatic calls live under this scope unless the policy sets `scope`. */
const SERVICE_SCOPE = 'svc';

/**
 * Rate limiting without HTTP: jobs, queues, outbound calls, anything keyed by a string.
 * Counters are shared with routes only through a policy `scope`.
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
  /** Compiled policies by identity, and by content for inline objects (see {@link PolicyCache}). */
  private readonly compiled = new PolicyCache((policy) => compilePolicy(policy, this.registry, 'RateLimiterService', SERVICE_SCOPE));
  /** The calls waiting in `acquire`, one first-come-first-served queue per counter. */
  private readonly waiters: RateLimitWaiters;
  private readonly pauseFailures: PartnerPauseFailures;
  /** Set when the module is about to close the store: no call reaches it any more. */
  private closed = false;
  /** Each recent key's key prefix (`<prefix>:{<tracker>}:`), the key read as {@link serviceTracker} reads it. */
  private readonly trackerPrefixes: StringMemo<string>;
  /** The turns of recent `acquire` calls, shared by the calls on one policy + key + cost. */
  private readonly turns = new AcquireTurns((compiled, key, cost) => this.newTurn(compiled, key, cost));

  constructor(
    private readonly engine: RateLimitEngine,
    private readonly registry: RateLimitAlgorithmRegistry,
    @Inject(RATE_LIMIT_OPTIONS) options: RateLimitModuleOptions,
  ) {
    const prefix = options.prefix ?? 'rl';
    const ipv6Subnet = options.ipv6Subnet ?? 64;
    this.trackerPrefixes = new StringMemo((key) => trackerKeyPrefix(prefix, serviceTracker(key, ipv6Subnet)));
    this.waiters = new RateLimitWaiters(options.maxWaiters);
    this.pauseFailures = new PartnerPauseFailures(options.storeErrorLogIntervalMs ?? 10_000, options.hooks?.storeError);
  }

  /** Takes `cost` units (default 1) from `key`'s quota under `policy`; a rejection takes nothing. */
  consume(policy: RateLimitPolicy, key: string, options: ConsumeOptions = {}): Promise<RateLimitDecision> {
    return this.decideOne(policy, key, options, 'consume');
  }

  /**
   * Takes from every policy atomically, in one store call: when any rejects, none is charged.
   * Policies must have distinct names.
   */
  async consumeAll(policies: readonly RateLimitPolicy[], key: string, options: ConsumeOptions = {}): Promise<MultiDecision> {
    const requests = policies.map((policy) => this.request(policy, options.cost));
    assertDistinctNames(requests);
    const { allowed, decisions } = await this.engine.decide(this.trackerPrefix(key), requests, 'consume');
    this.assertOpen();
    return { allowed, decisions };
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
  async reserve(
    policies: RateLimitPolicy | readonly RateLimitPolicy[],
    key: string,
    options: ConsumeOptions = {},
  ): Promise<RateLimitReservation> {
    const requests = ([] as RateLimitPolicy[]).concat(policies).map((policy) => this.request(policy, options.cost));
    assertReservable(requests);
    const result = await this.engine.decide(this.trackerPrefix(key), requests, 'consume');
    this.assertOpen();
    return reservationOf(this.engine, result, () => this.assertOpen());
  }

  /** What `consume` would decide now, without taking anything. */
  peek(policy: RateLimitPolicy, key: string, options: ConsumeOptions = {}): Promise<RateLimitDecision> {
    return this.decideOne(policy, key, options, 'peek');
  }

  /** Restores `key`'s full quota under `policy` and lifts any lockout. */
  async reset(policy: RateLimitPolicy, key: string): Promise<void> {
    const [call] = this.engine.calls(this.trackerPrefix(key), [this.request(policy, 0)]);
    await this.engine.store.delete([call.stateKey, call.blockKey]);
  }

  /**
   * Gives back `cost` units taken earlier under `policy` (for outcomes that should not count): a whole number
   * from 1 to the policy's capacity (`burst` for the bucket algorithms, `limit` otherwise), since more can
   * never have been taken; other values reject with a RateLimitConfigError.
   */
  async refund(policy: RateLimitPolicy, key: string, cost = 1): Promise<void> {
    await this.engine.refund(this.engine.calls(this.trackerPrefix(key), [this.boundedRequest('refund', policy, cost)]));
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
  async penalty(policy: RateLimitPolicy, key: string, cost = 1): Promise<RateLimitDecision> {
    const request = this.boundedRequest('penalty', policy, cost);
    if (request.compiled.algorithm.name === 'concurrency') {
      throw new RateLimitConfigError(
        `penalty: policy '${request.compiled.name}' uses 'concurrency', which takes leases; penalties need a counter.`,
      );
    }
    const calls = this.engine.calls(this.trackerPrefix(key), [request]);
    const { verdicts } = await penalizeIn(this.engine.store, calls);
    this.assertOpen();
    return this.engine.toDecisions([request], verdicts)[0];
  }

  /**
   * Locks `key` out of `policy` for `duration` from now (the store's clock), whatever its counter says. Never
   * shortens a lockout in force: when one ends later, it stays as it is (to shorten one, {@link unblock} first).
   * With `escalate`, the tracker's offence count is kept, and this lockout does not add to it.
   */
  async block(policy: RateLimitPolicy, key: string, duration: Duration): Promise<void> {
    const ms = parseDuration(duration, 'block duration');
    // No lease id: in a block the token is the lockout's note.
    const request = { ...this.request(policy, 0), token: '' };
    await this.engine.store.block(this.engine.calls(this.trackerPrefix(key), [request]), ms);
  }

  /**
   * Lifts a lockout of `key` under `policy`. Its counter is kept; with `escalate` its offence count is
   * forgotten (the next lockout is `blockFor` again), as after the quiet period.
   */
  async unblock(policy: RateLimitPolicy, key: string): Promise<void> {
    const [call] = this.engine.calls(this.trackerPrefix(key), [this.request(policy, 0)]);
    await this.engine.store.delete([call.blockKey]);
  }

  /**
   * Denies the tracker `key` (`ip:203.0.113.7`, `user:42`, or what a `by` function returns, such as an API key)
   * until `until` — a duration from now, or a date on the store's clock — on every policy of every route and
   * every service call, on every instance: each decision for it is rejected as a lockout (429 with
   * `Retry-After` until then). A deny in force that ends later is kept (to shorten one, {@link allow} first).
   * `reason` (at most 256 characters) is kept with it for {@link denied}; clients never see it. Each instance
   * answers a tracker it knows to be denied without a store round trip, and asks the store again each second.
   * @example await limiter.deny('ip:203.0.113.7', '1h', 'credential stuffing');
   */
  async deny(key: string, until: Duration | Date, reason?: string): Promise<void> {
    await this.engine.denials.deny(this.denyKey(key), until, reason);
    this.assertOpen();
  }

  /** Lifts the deny of tracker `key`: at once on this instance, within a second on the others. */
  async allow(key: string): Promise<void> {
    await this.engine.denials.allow(this.denyKey(key));
  }

  /** The deny of tracker `key` in force (its end on the store's clock, and its reason), or `undefined`. */
  async denied(key: string): Promise<RateLimitDenial | undefined> {
    const denial = await this.engine.denials.denied(this.denyKey(key));
    this.assertOpen();
    return denial;
  }

  /**
   * Takes a `concurrency` lease for non-HTTP work. When allowed, `release()` frees the slot early;
   * otherwise `release()` does nothing. A lease never released expires after the policy's window; work that
   * may outlast it keeps it with `extend()`.
   * @example const lease = await limiter.lease(exportsPolicy, tenantId); try { … } finally { await lease.release(); }
   */
  async lease(policy: RateLimitPolicy, key: string): Promise<RateLimitLease> {
    const request = this.request(policy, undefined);
    if (request.compiled.algorithm.name !== 'concurrency') {
      throw new RateLimitConfigError(
        `lease: policy '${request.compiled.name}' uses '${request.compiled.algorithm.name}'; leases need algorithm 'concurrency'.`,
      );
    }
    const { decisions, calls } = await this.engine.decide(this.trackerPrefix(key), [request], 'consume');
    this.assertOpen();
    return leaseOf(this.engine, request.compiled, decisions[0], calls, () => this.assertOpen());
  }

  /**
   * Waits until `key` may proceed under `policy`, then takes the quota and resolves with the decision:
   * outbound throttling, shared by every instance through the store. Calls of this process on the same
   * policy + key wait in line, first come first served, and only the first asks the store (so each process
   * has one caller contending for the quota); at most `maxWaiters` wait at once. Rejects with {@link RateLimitWaitError} as
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

  /** Calls of this process waiting in `acquire` for `key` under `policy` now (for metrics and health checks). */
  waiting(policy: RateLimitPolicy, key: string): number {
    const [call] = this.engine.calls(this.trackerPrefix(key), [{ ...this.request(policy, 0), token: '' }]);
    return this.waiters.waiting(call.stateKey);
  }

  /**
   * Pauses `key` under `policy` on every instance: each `consume`, `acquire` and `wrap` call is rejected until
   * then (`retryAfterMs` counts to the pause's end on the store's clock), so `acquire` waits for it, or rejects
   * at once when it ends after `maxWaitMs`. `until` is a duration from now, or a date on the store's clock.
   * Built on the lockout of {@link block}: a longer pause in force is never shortened. Resolves with the
   * pause applied, ms (0 for a date already past: nothing is paused).
   * @example await limiter.pause(partnerPolicy, 'partner-api', '30s'); // the partner said so
   */
  async pause(policy: RateLimitPolicy, key: string, until: Duration | Date): Promise<number> {
    const ms = until instanceof Date ? await this.msUntil(policy, key, until) : parseDuration(until, 'pause: until');
    if (ms > 0) await this.block(policy, key, ms);
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
   * await limiter.pauseFromResponse(partnerPolicy, 'partner-api', res);
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
   * const partnerFetch = limiter.wrapFetch(partnerPolicy, 'partner-api', fetch, { maxWaitMs: 10_000 });
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
   * ends at once with {@link RateLimitShutdownError} (so a request waiting in one does not hold the close up),
   * and no new wait starts. Decisions that need no wait are still made: the store is open until
   * {@link onApplicationShutdown}.
   */
  beforeApplicationShutdown(): void {
    this.waiters.shutdown();
  }

  /**
   * Called by Nest before the module closes the store: from now on every call rejects with
   * {@link RateLimitShutdownError}, and so does a decision still in flight (a closed store's fallback must
   * not grant it).
   */
  onApplicationShutdown(): void {
    this.beforeApplicationShutdown();
    this.closed = true;
  }

  /**
   * Wraps `fn` so that every call first waits for its turn (see {@link acquire}).
   * @example const callPartner = limiter.wrap(partnerPolicy, 'partner-api', (id: string) => http.get(id));
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

  /**
   * One policy's decision as one promise, however the store answers: an in-process answer (memory store, a
   * shed hot key) is not awaited again. Bad input rejects the promise, as it would from an `async` method.
   */
  private decideOne(policy: RateLimitPolicy, key: string, options: ConsumeOptions, mode: DecisionMode): Promise<RateLimitDecision> {
    try {
      const result = this.engine.decideNowOrLater(this.trackerPrefix(key), [this.request(policy, options.cost)], mode);
      return result instanceof Promise ? result.then(this.openDecision) : Promise.resolve(firstDecision(result));
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  private denyKey(key: string): string {
    this.assertOpen();
    return this.engine.denyKey(this.trackerPrefix(key));
  }

  private trackerPrefix(key: string): string {
    assertKey(key);
    return this.trackerPrefixes.get(key);
  }

  /** The first decision of a result that arrived; rejects it when the module closed meanwhile. */
  private readonly openDecision = (result: EngineDecision): RateLimitDecision => {
    this.assertOpen();
    return result.decisions[0];
  };

  /** Throws once the module has closed (see {@link onApplicationShutdown}). */
  private assertOpen(): void {
    if (this.closed) {
      throw new RateLimitShutdownError(
        'RateLimiterService: the application is shutting down; the rate-limit store is closed, so nothing is decided.',
      );
    }
  }

  /**
   * One `acquire` call's turn for the waiters, checked as every call is (key, shutdown, policy, cost), and
   * shared by the calls on the same policy + key + cost (see {@link AcquireTurns}).
   */
  private turn(policy: RateLimitPolicy, key: string, cost: number | undefined): AcquireTurn {
    assertKey(key);
    const compiled = this.staticPolicy(policy);
    return this.turns.get(compiled, key, this.units(compiled, cost));
  }

  /** A turn: its counter, its pace, and the store decision that takes its quota. */
  private newTurn(compiled: CompiledPolicy, key: string, cost: number): AcquireTurn {
    const prefix = this.trackerPrefix(key);
    const params = compiled.staticParams!;
    const request: PolicyRequest = { compiled, params, cost };
    return {
      queueKey: this.engine.calls(prefix, [{ ...request, token: '' }])[0].stateKey,
      key,
      policy: compiled.name,
      cost,
      pace: paceOf(compiled.algorithm.name, params.limit, params.windowMs),
      take: async () => {
        const { decisions, calls } = await this.engine.decide(prefix, [request], 'consume');
        this.assertOpen();
        return { decision: decisions[0], giveBack: () => this.engine.refund(calls) };
      },
    };
  }

  /** ms from the store's now until `date` (one peek: a pause's end is on the store's clock); 0 once it has passed. */
  private async msUntil(policy: RateLimitPolicy, key: string, date: Date): Promise<number> {
    const at = date.getTime();
    if (!Number.isFinite(at)) throw new RateLimitConfigError(`pause: until: ${describeValue(date)} is not a valid date.`);
    const calls = this.engine.calls(this.trackerPrefix(key), [{ ...this.request(policy, 0), token: '' }]);
    const { nowMs } = await this.engine.store.decide(calls, 'peek');
    this.assertOpen();
    return Math.max(0, Math.ceil(at - nowMs));
  }

  /**
   * A refund's or a penalty's request: its cost is a whole number from 1 to the policy's capacity (more can
   * never have been taken; more as a penalty is a lockout).
   */
  private boundedRequest(what: 'refund' | 'penalty', policy: RateLimitPolicy, cost: number): PolicyRequest {
    const request = this.request(policy, 0);
    const { compiled, params } = request;
    const bound = compiled.algorithm.usesBurst ? 'burst' : 'limit';
    const capacity = params[bound];
    if (typeof cost !== 'number' || !Number.isInteger(cost) || cost < 1 || cost > capacity) {
      throw new RateLimitConfigError(
        `${what}: cost: ${describeValue(cost)} must be a whole number from 1 to ${capacity} (the ${bound} of policy '${compiled.name}'${what === 'refund' ? ': more can never have been taken' : '; for longer, use block()'}).`,
      );
    }
    return { ...request, cost };
  }

  private request(policy: RateLimitPolicy, cost: number | undefined): PolicyRequest {
    const compiled = this.staticPolicy(policy);
    return { compiled, params: compiled.staticParams!, cost: this.units(compiled, cost) };
  }

  /** `policy` compiled, once the module is known to be open; it must have numbers for its limit and window. */
  private staticPolicy(policy: RateLimitPolicy): CompiledPolicy {
    this.assertOpen();
    const compiled = this.compile(policy);
    if (!compiled.staticParams) {
      throw new RateLimitConfigError(
        `RateLimiterService: policy '${compiled.name}' computes its limit or window from the request context, which a programmatic call does not have; pass numbers.`,
      );
    }
    return compiled;
  }

  /** The units a call takes: its `cost`, or the policy's own. */
  private units(compiled: CompiledPolicy, cost: number | undefined): number {
    const units = cost === undefined ? compiled.staticCost : validCost(cost, 'cost');
    if (units === undefined) {
      throw new RateLimitConfigError(
        `RateLimiterService: policy '${compiled.name}' computes its cost from the request context; pass { cost } to the call.`,
      );
    }
    return units;
  }

  private compile(policy: RateLimitPolicy): CompiledPolicy {
    return this.compiled.get(policy);
  }
}

/** `maxPause` in ms (see {@link PartnerPauseOptions}). */
function maxPauseMs(maxPause: Duration | undefined): number {
  return maxPause === undefined ? DEFAULT_MAX_PAUSE_MS : parseDuration(maxPause, 'maxPause');
}

/** A service call's `key`: a non-empty string. */
function assertKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0) {
    throw new RateLimitConfigError(
      `key: ${describeValue(key)} must be a non-empty string ('ip:<address>', 'user:<id>', or what a by function returns).`,
    );
  }
}

function firstDecision(result: EngineDecision): RateLimitDecision {
  return result.decisions[0];
}

function assertDistinctNames(requests: readonly PolicyRequest[]): void {
  if (requests.length > MAX_POLICIES_PER_DECISION) {
    throw new RateLimitConfigError(`consumeAll: ${requests.length} policies; at most ${MAX_POLICIES_PER_DECISION} are decided together.`);
  }
  const names = new Set<string>();
  for (const { compiled } of requests) {
    if (names.has(compiled.name)) {
      throw new RateLimitConfigError(`consumeAll: two policies are named '${compiled.name}'; give each policy of one call its own name.`);
    }
    names.add(compiled.name);
  }
}
