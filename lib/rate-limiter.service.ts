import { Inject, Injectable } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
import { RateLimitConfigError } from './errors/rate-limit-config.error';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import type { Duration, RateLimitPolicy } from './interfaces/policy.interface';
import { RateLimitWaitError } from './errors/rate-limit-wait.error';
import { parseDuration } from './utils/duration';
import { RateLimitEngine, type EngineDecision, type PolicyRequest } from './rate-limit.engine';
import { MAX_POLICIES_PER_DECISION, type DecisionMode } from './stores/store.interface';
import { RATE_LIMIT_OPTIONS } from './rate-limit.module-definition';
import { compilePolicy, cost as validCost, type CompiledPolicy } from './utils/compile-policy';
import { trackerKeyPrefixes } from './utils/keys';
import { describeValue } from './utils/describe-value';
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
}

/** Counters of programmatic calls live under this scope unless the policy sets `scope`. */
const SERVICE_SCOPE = 'svc';

/**
 * Rate limiting without HTTP: jobs, queues, outbound calls, anything keyed by a string.
 * Counters are shared with routes only through a policy `scope`.
 * @example const d = await limiter.consume({ algorithm: 'gcra', limit: 10, window: '1s' }, `user:${id}`);
 */
@Injectable()
export class RateLimiterService {
  private readonly compiled = new WeakMap<RateLimitPolicy, CompiledPolicy>();
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

  /** Gives back `cost` units taken earlier under `policy` (for outcomes that should not count). */
  async refund(policy: RateLimitPolicy, key: string, cost = 1): Promise<void> {
    await this.engine.refund(this.engine.calls(this.trackerPrefix(key), [this.request(policy, cost)]));
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
   * otherwise `release()` does nothing. A lease never released expires after the policy's window.
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
    let released = !decisions[0].allowed;
    return {
      decision: decisions[0],
      release: async () => {
        if (released) return;
        released = true;
        await this.engine.refund(calls);
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
        if (decision.delayMs) await sleep(decision.delayMs, options.signal);
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
      await sleep(wait, options.signal);
    }
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
      return result instanceof Promise ? result.then(firstDecision) : Promise.resolve(firstDecision(result));
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

  private request(policy: RateLimitPolicy, cost: number | undefined): PolicyRequest {
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

/** Resolves after `ms`, or rejects when `signal` aborts (clearing the timer). */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
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
