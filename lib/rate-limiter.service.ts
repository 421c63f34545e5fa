import { Inject, Injectable, type BeforeApplicationShutdown, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
import { RateLimitConfigError } from './errors/rate-limit-config.error';
import { RateLimitStoreError } from './errors/rate-limit-store.error';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import type { Duration, RateLimitPolicy } from './interfaces/policy.interface';
import { RateLimitShutdownError, RateLimitWaitError } from './errors/rate-limit-wait.error';
import { parseDuration } from './utils/duration';
import { RateLimitEngine, type EngineDecision, type PolicyRequest } from './rate-limit.engine';
import { MAX_POLICIES_PER_DECISION, type DecisionMode, type RateLimitCall } from './stores/store.interface';
import { RATE_LIMIT_OPTIONS } from './rate-limit.module-definition';
import { compilePolicy, cost as validCost, resolveParams, type CompiledPolicy } from './utils/compile-policy';
import { trackerKeyPrefixes } from './utils/keys';
import { describeValue } from './utils/describe-value';
import { penalizeIn } from './stores/store-health';
import type { StringMemo } from './utils/string-memo';

/** Options of one programmatic decision. */
export interface ConsumeOptions {
  /** Units to take. @default the policy's cost, or 1 */
  cost?: number;
}

/** The decisions of several policies taken together. */
export interface MultiDecision {
  /** True when every policy allowed (and all were charged); false when none was charged. */
  allowed: boolean;
  decisions: RateLimitDecision[];
}

/** Options of {@link RateLimiterService.acquire}. */
export interface AcquireOptions extends ConsumeOptions {
  /**
   * Longest the call may wait for its turn, ms; past it `acquire` rejects at once (it never waits in vain).
   * @default Infinity
   */
  maxWaitMs?: number;
  /** Aborts the wait. */
  signal?: AbortSignal;
}

/** A concurrency lease: holds one slot until released (or until the policy's window expires it). */
export interface RateLimitLease {
  decision: RateLimitDecision;
  /** Gives the slot back; safe to call more than once. */
  release(): Promise<void>;
  /**
   * Heartbeat for long work: moves the lease's expiry to now + `ms` (default: the policy's window) on the
   * store's clock, atomically, never earlier than it was. Resolves `true` while the lease is held; `false`
   * once it was released, was never granted, or has expired (its slot may belong to another holder now:
   * stop the work or take a new lease). Rejects with a RateLimitStoreError when the store does not answer
   * (whether the lease is held is then unknown). Call it well within the window, e.g. every third of it.
   * @example
   * const lease = await limiter.lease({ algorithm: 'concurrency', limit: 2, window: '30s' }, tenantId);
   * const beat = setInterval(() => void lease.extend().then((held) => held || controller.abort()), 10_000);
   * try { await runExport(controller.signal); } finally { clearInterval(beat); await lease.release(); }
   */
  extend(ms?: Duration): Promise<boolean>;
}

/** Counters of programmatic calls live under this scope unless the policy sets `scope`. */
const SERVICE_SCOPE = 'svc';

/**
 * Rate limiting without HTTP: jobs, queues, outbound calls, anything keyed by a string.
 * Counters are shared with routes only through a policy `scope`.
 * @example const d = await limiter.consume({ algorithm: 'gcra', limit: 10, window: '1s' }, `user:${id}`);
 *
 * On shutdown (`app.close()`), pending `acquire()` waits end at once with {@link RateLimitShutdownError}, and
 * once the module closes its store every call rejects with it: nothing is decided, nor granted, after close.
 */
@Injectable()
export class RateLimiterService implements BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly compiled = new WeakMap<RateLimitPolicy, CompiledPolicy>();
  /** Each pending wait of `acquire`, as the function that ends it with a RateLimitShutdownError. */
  private readonly waits = new Set<() => void>();
  /** Set when the app begins to close: no wait starts any more. */
  private shuttingDown = false;
  /** Set when the module is about to close the store: no call reaches it any more. */
  private closed = false;
  private readonly trackerPrefixes: StringMemo<string>;

  constructor(
    private readonly engine: RateLimitEngine,
    private readonly registry: RateLimitAlgorithmRegistry,
    @Inject(RATE_LIMIT_OPTIONS) options: RateLimitModuleOptions,
  ) {
    this.trackerPrefixes = trackerKeyPrefixes(options.prefix);
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

  /** Locks `key` out of `policy` for `duration` from now (the store's clock), whatever its counter says. */
  async block(policy: RateLimitPolicy, key: string, duration: Duration): Promise<void> {
    const ms = parseDuration(duration, 'block duration');
    await this.engine.store.block(this.engine.calls(this.trackerPrefix(key), [this.request(policy, 0)]), ms);
  }

  /** Lifts a lockout of `key` under `policy` (its counter is kept). */
  async unblock(policy: RateLimitPolicy, key: string): Promise<void> {
    const [call] = this.engine.calls(this.trackerPrefix(key), [this.request(policy, 0)]);
    await this.engine.store.delete([call.blockKey]);
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
    let released = !decisions[0].allowed;
    return {
      decision: decisions[0],
      release: async () => {
        if (released) return;
        released = true;
        await this.engine.refund(calls);
      },
      extend: async (ms?: Duration) => {
        const renewal = renewalOf(calls[0], request.compiled, ms);
        return !released && this.renew(renewal);
      },
    };
  }

  /**
   * Waits until `key` may proceed under `policy`, then takes the quota and resolves with the decision:
   * outbound throttling, shared by every instance through the store. Rejects with
   * {@link RateLimitWaitError} as soon as the wait would exceed `maxWaitMs`, or when `signal` aborts.
   * With `leaky-bucket` the slot is reserved at once and the call waits exactly its `delayMs`.
   */
  async acquire(policy: RateLimitPolicy, key: string, options: AcquireOptions = {}): Promise<RateLimitDecision> {
    const deadline = Date.now() + (options.maxWaitMs ?? Infinity);
    for (;;) {
      throwIfAborted(options.signal);
      const decision = await this.consume(policy, key, options);
      if (decision.allowed) {
        if (decision.delayMs) {
          const what = `the delay of '${key}' for policy '${decision.policy}' ended (its slot was taken)`;
          await this.sleep(decision.delayMs, options.signal, what);
        }
        return decision;
      }
      const wait = decision.retryAfterMs;
      if (!Number.isFinite(wait) || Date.now() + wait > deadline) {
        throw new RateLimitWaitError(
          Number.isFinite(wait)
            ? `acquire: '${key}' would wait ${wait} ms for policy '${decision.policy}', more than maxWaitMs (${options.maxWaitMs} ms).`
            : `acquire: the cost can never fit policy '${decision.policy}' (limit ${decision.limit}).`,
          wait,
        );
      }
      await this.sleep(wait, options.signal, `the wait of '${key}' for policy '${decision.policy}' ended (nothing was taken)`);
    }
  }

  /**
   * Called by Nest when the app begins to close, before the HTTP server stops: every pending `acquire()` wait
   * ends at once with {@link RateLimitShutdownError} (so a request waiting in one does not hold the close up),
   * and no new wait starts. Decisions that need no wait are still made: the store is open until
   * {@link onApplicationShutdown}.
   */
  beforeApplicationShutdown(): void {
    this.shuttingDown = true;
    for (const end of this.waits) end();
    this.waits.clear();
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

  private trackerPrefix(key: string): string {
    if (typeof key !== 'string' || key.length === 0) {
      throw new RateLimitConfigError(`key: ${describeValue(key)} must be a non-empty string (a user id, an API key, an IP…).`);
    }
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
   * Resolves after `ms`; rejects when `signal` aborts, or with {@link RateLimitShutdownError} as soon as the
   * app begins to close (`what` words what ended, for its message). Its timer is cleared either way.
   */
  private sleep(ms: number, signal: AbortSignal | undefined, what: string): Promise<void> {
    const ended = () => new RateLimitShutdownError(`acquire: the application is shutting down; ${what}.`);
    if (this.shuttingDown) return Promise.reject(ended());
    return new Promise((resolve, reject) => {
      const settle = (error?: Error) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.waits.delete(onShutdown);
        if (error) reject(error);
        else resolve();
      };
      const onAbort = () => settle(abortError());
      const onShutdown = () => settle(ended());
      const timer = setTimeout(() => settle(), ms);
      this.waits.add(onShutdown);
      signal?.addEventListener('abort', onAbort, { once: true });
      // The signal may have aborted while the decision was on its way.
      if (signal?.aborted) onAbort();
    });
  }

  /** Asks the store to renew a lease (see {@link RateLimitLease.extend}); true while it is held. */
  private async renew(renewal: RateLimitCall): Promise<boolean> {
    this.assertOpen();
    // Straight to the store: a renewal is not a decision (no hook, no event), and it answers only "held?".
    const { verdicts } = await this.engine.store.decide([renewal], 'consume');
    this.assertOpen();
    if (verdicts[0].reason === 3) {
      throw new RateLimitStoreError('lease.extend: the rate-limit store did not answer; whether the lease is still held is unknown.');
    }
    return verdicts[0].allowed;
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
    this.assertOpen();
    const compiled = this.compile(policy);
    if (!compiled.staticParams) {
      throw new RateLimitConfigError(
        `RateLimiterService: policy '${compiled.name}' computes its limit or window from the request context, which a programmatic call does not have; pass numbers.`,
      );
    }
    const units = cost === undefined ? compiled.staticCost : validCost(cost, 'cost');
    if (units === undefined) {
      throw new RateLimitConfigError(
        `RateLimiterService: policy '${compiled.name}' computes its cost from the request context; pass { cost } to the call.`,
      );
    }
    return { compiled, params: compiled.staticParams, cost: units };
  }

  private compile(policy: RateLimitPolicy): CompiledPolicy {
    let compiled = this.compiled.get(policy);
    if (!compiled) {
      compiled = compilePolicy(policy, this.registry, 'RateLimiterService', SERVICE_SCOPE);
      this.compiled.set(policy, compiled);
    }
    return compiled;
  }
}

function firstDecision(result: EngineDecision): RateLimitDecision {
  return result.decisions[0];
}

/**
 * The call that renews the lease `call` took, to expire `ms` (default: its window) from the store's now: a
 * negative cost names the lease's units (see concurrency.lua). No lockout applies (a lockout stops new leases,
 * not the renewal of one held): the call reads a lockout key that is never written, and writes none.
 */
function renewalOf(call: RateLimitCall, compiled: CompiledPolicy, ms: Duration | undefined): RateLimitCall {
  const windowMs = ms === undefined ? call.params.windowMs : parseDuration(ms, 'lease.extend: ms');
  const params = resolveParams(compiled, call.params.limit, windowMs, 'lease.extend');
  return { ...call, cost: -call.cost, params, blockForMs: 0, blockKey: `${call.blockKey}:none` };
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw abortError();
}

function abortError(): RateLimitWaitError {
  return new RateLimitWaitError('acquire: aborted by its signal.', 0, true);
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
