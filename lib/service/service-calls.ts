import { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitShutdownError } from '../errors/rate-limit-wait.error';
import { serviceTracker } from '../http/tracker';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import type { RateLimitPolicy } from '../interfaces/policy.interface';
import type { PolicyRequest, RateLimitEngine } from '../pipeline/rate-limit.engine';
import { compilePolicy, cost as validCost, type CompiledPolicy } from '../policy/compile-policy';
import { PolicyCache } from '../policy/policy-cache';
import { describeValue } from '../shared/describe-value';
import { trackerKeyPrefix } from '../shared/keys';
import { StringMemo } from '../shared/string-memo';
import type { RateLimitCall } from '../stores/store.interface';

/** Counters of programmatic calls live under this scope unless the policy sets `scope`. */
const SERVICE_SCOPE = 'svc';

/**
 * What the programmatic injectables share (`RateLimiterService`, `RateLimitAdmin`, `RateLimitOutbound`): the
 * engine, the policies they compiled, the keys as trackers, and whether the module has closed. One per module,
 * so a policy object compiles once whichever injectable is called with it.
 */
export class ServiceCalls {
  /** Compiled policies by identity, and by content for inline objects (see {@link PolicyCache}). */
  private readonly compiled: PolicyCache;
  /** Each recent key's key prefix (`<prefix>:{<tracker>}:`), the key read as {@link serviceTracker} reads it. */
  private readonly trackerPrefixes: StringMemo<string>;
  /** Set when the module is about to close the store: no call reaches it any more. */
  private closed = false;

  constructor(
    readonly engine: RateLimitEngine,
    registry: RateLimitAlgorithmRegistry,
    options: RateLimitModuleOptions,
  ) {
    const prefix = options.prefix ?? 'rl';
    const ipv6Subnet = options.ipv6Subnet ?? 64;
    this.compiled = new PolicyCache((policy) => compilePolicy(policy, registry, 'RateLimiterService', SERVICE_SCOPE));
    this.trackerPrefixes = new StringMemo((key) => trackerKeyPrefix(prefix, serviceTracker(key, ipv6Subnet)));
  }

  /** From now on every call rejects with {@link RateLimitShutdownError} (the module is closing its store). */
  close(): void {
    this.closed = true;
  }

  /** Throws once the module has closed (see {@link close}). */
  assertOpen(): void {
    if (this.closed) {
      throw new RateLimitShutdownError(
        'RateLimiterService: the application is shutting down; the rate-limit store is closed, so nothing is decided.',
      );
    }
  }

  /** The key prefix of tracker `key` (`<prefix>:{<tracker>}:`). */
  trackerPrefix(key: string): string {
    assertKey(key);
    return this.trackerPrefixes.get(key);
  }

  /** The deny-list key of tracker `key`. */
  denyKey(key: string): string {
    this.assertOpen();
    return this.engine.denyKey(this.trackerPrefix(key));
  }

  /** The store call of `policy` for `key` that takes nothing (a lockout's or a reset's keys; no lease id). */
  keysOf(policy: RateLimitPolicy, key: string): RateLimitCall {
    return this.engine.calls(this.trackerPrefix(key), [{ ...this.request(policy, 0), token: '' }])[0];
  }

  /** Locks `key` out of `policy` for `ms` from now on the store's clock (see `RateLimitAdmin.block`). */
  async block(policy: RateLimitPolicy, key: string, ms: number): Promise<void> {
    await this.engine.store.block([this.keysOf(policy, key)], ms);
  }

  /** One policy's request with `cost` units (the policy's own when `undefined`). */
  request(policy: RateLimitPolicy, cost: number | undefined): PolicyRequest {
    const compiled = this.staticPolicy(policy);
    return { compiled, params: compiled.staticParams!, cost: this.units(compiled, cost) };
  }

  /**
   * A refund's or a penalty's request: its cost is a whole number from 1 to the policy's capacity (more can
   * never have been taken; more as a penalty is a lockout).
   */
  boundedRequest(what: 'refund' | 'penalty', policy: RateLimitPolicy, cost: number): PolicyRequest {
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

  /** `policy` compiled, once the module is known to be open; it must have numbers for its limit and window. */
  staticPolicy(policy: RateLimitPolicy): CompiledPolicy {
    this.assertOpen();
    const compiled = this.compiled.get(policy);
    if (!compiled.staticParams) {
      throw new RateLimitConfigError(
        `RateLimiterService: policy '${compiled.name}' computes its limit or window from the request context, which a programmatic call does not have; pass numbers.`,
      );
    }
    return compiled;
  }

  /** The units a call takes: its `cost`, or the policy's own. */
  units(compiled: CompiledPolicy, cost: number | undefined): number {
    const units = cost === undefined ? compiled.staticCost : validCost(cost, 'cost');
    if (units === undefined) {
      throw new RateLimitConfigError(
        `RateLimiterService: policy '${compiled.name}' computes its cost from the request context; pass { cost } to the call.`,
      );
    }
    return units;
  }
}

/** A service call's `key`: a non-empty string. */
export function assertKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0) {
    throw new RateLimitConfigError(
      `key: ${describeValue(key)} must be a non-empty string ('ip:<address>', 'user:<id>', or what a by function returns).`,
    );
  }
}
