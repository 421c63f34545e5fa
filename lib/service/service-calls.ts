import { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitShutdownError } from '../errors/rate-limit-wait.error';
import { serviceTracker } from '../http/tracker';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { RATE_LIMIT_CRITICALITIES, type RateLimitCriticality } from '../interfaces/overload.interface';
import type { RateLimitPolicy } from '../interfaces/policy.interface';
import { UnmatchedOverrides } from '../pipeline/override-copy';
import { newTrackerKeys, type PolicyRequest, type RateLimitEngine, type TrackerKeys } from '../pipeline/rate-limit.engine';
import { compilePolicy, cost as validCost, type CompiledPolicy } from '../policy/compile-policy';
import { PolicyCache } from '../policy/policy-cache';
import { describeValue } from '../shared/describe-value';
import { trackerKeyPrefix } from '../shared/keys';
import { LruMap } from '../shared/lru-map';
import { StringMemo } from '../shared/string-memo';
import type { KeySlot, RateLimitCall } from '../stores/store.interface';

/** Counters of programmatic calls live under this scope unless the policy sets `scope`. */
const SERVICE_SCOPE = 'svc';
/** Most policy names remembered for runtime overrides (see {@link ServiceCalls.policyNamed}). */
const MAX_NAMED = 1_000;
/** The tracker namespaces a key may name (see {@link serviceTracker}). */
const TRACKER_NAMESPACES = ['ip:', 'user:', 'rpc:', 'by:'] as const;

/**
 * A service key as a tracker, its keys (under `<prefix>:{<tracker>}:`), the runtime overrides it matched, and
 * the state key it was last decided on (see {@link ServiceCalls.stateSlot}).
 */
export class ServiceKey extends UnmatchedOverrides {
  lastSuffix: string | undefined = undefined;
  lastSlot: KeySlot | undefined = undefined;

  constructor(
    readonly tracker: string,
    readonly keys: TrackerKeys,
  ) {
    super();
  }
}

/**
 * What the programmatic injectables share (`RateLimiterService`, `RateLimitAdmin`, `RateLimitOutbound`): the
 * engine, the policies they compiled, the keys as trackers, and whether the module has closed. One per module,
 * so a policy object compiles once whichever injectable is called with it.
 */
export class ServiceCalls {
  /** Compiled policies by identity, and by content for inline objects (see {@link PolicyCache}). */
  private readonly compiled: PolicyCache;
  /** Each recent key's tracker ({@link serviceTracker}) and keys. */
  private readonly trackers: StringMemo<ServiceKey>;
  /** The policy these calls compiled last under each name (at most 1,000 names): what runtime overrides may name too. */
  private readonly named = new LruMap<CompiledPolicy>();
  private readonly ipv6Subnet: number;
  /** The last request made (requests are never changed once made): a call site deciding one policy reuses it. */
  private lastRequest: PolicyRequest | undefined;
  /** Set when the module is about to close the store: no call reaches it any more. */
  private closed = false;

  constructor(
    readonly engine: RateLimitEngine,
    registry: RateLimitAlgorithmRegistry,
    options: RateLimitModuleOptions,
  ) {
    const prefix = options.prefix ?? 'rl';
    const ipv6Subnet = (this.ipv6Subnet = options.ipv6Subnet ?? 64);
    this.compiled = new PolicyCache((policy) => this.learn(compilePolicy(policy, registry, 'RateLimiterService', SERVICE_SCOPE)));
    this.trackers = new StringMemo((key) => {
      const tracker = serviceTracker(key, ipv6Subnet);
      // Its own holder, not the engine's memo: this memo already keeps it, one lookup per new key is enough.
      const keys = newTrackerKeys(trackerKeyPrefix(prefix, tracker));
      return new ServiceKey(tracker, keys);
    });
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

  /** The keys of tracker `key` (`<prefix>:{<tracker>}:…`), kept with the tracker: the engine need not find it again. */
  trackerKeys(key: string): TrackerKeys {
    return this.serviceKey(key).keys;
  }

  /** Tracker `key` as these calls remember it. */
  serviceKey(key: string): ServiceKey {
    assertKey(key);
    return this.trackers.get(key);
  }

  /**
   * The state key of `compiled` for `known`, with its slot: the last one asked is kept on the tracker, so a
   * call site deciding one policy finds it without looking among the tracker's keys.
   */
  stateSlot(known: ServiceKey, compiled: CompiledPolicy): KeySlot {
    const suffix = compiled.stateKeySuffix;
    if (known.lastSuffix === suffix) return known.lastSlot!;
    const slot = known.keys.get(suffix);
    known.lastSuffix = suffix;
    known.lastSlot = slot;
    return slot;
  }

  /** The tracker `key` names (see {@link serviceTracker}). */
  tracker(key: string): string {
    return this.serviceKey(key).tracker;
  }

  /** The policy these calls compiled last under `name`, if any. */
  policyNamed(name: string): CompiledPolicy | undefined {
    return this.named.get(name);
  }

  /**
   * A runtime override's tracker pattern as decisions match it: `*`; a prefix ending in `*`, in the `by:`
   * namespace unless it names one (`gold-*` → `by:gold-*`, `ip:10.0.*` as it is); or a tracker, as a key names
   * it ({@link serviceTracker}: `acme` → `by:acme`, `ip:` addresses normalised as the guard does).
   */
  overridePattern(tracker: string): string {
    if (tracker === '*') return tracker;
    if (tracker.endsWith('*')) return TRACKER_NAMESPACES.some((ns) => tracker.startsWith(ns)) ? tracker : `by:${tracker}`;
    try {
      return serviceTracker(tracker, this.ipv6Subnet);
    } catch (error) {
      throw new RateLimitConfigError(`setOverride: tracker${(error as Error).message.replace(/^key/, '')}`);
    }
  }

  /** The deny-list key of tracker `key`. */
  denyKey(key: string): string {
    this.assertOpen();
    return this.engine.denyKey(this.trackerKeys(key));
  }

  /** The store call of `policy` for `key` that takes nothing (a lockout's or a reset's keys; no lease id). */
  keysOf(policy: RateLimitPolicy, key: string): RateLimitCall {
    return this.engine.calls(this.trackerKeys(key), [{ ...this.request(policy, 0), token: '' }])[0];
  }

  /** Locks `key` out of `policy` for `ms` from now on the store's clock (see `RateLimitAdmin.block`). */
  async block(policy: RateLimitPolicy, key: string, ms: number): Promise<void> {
    await this.engine.store.block([this.keysOf(policy, key)], ms);
  }

  /**
   * One policy's request with `cost` units (the policy's own when `undefined`); for `key`, with the runtime
   * override matching its tracker applied.
   */
  request(policy: RateLimitPolicy, cost: number | undefined, key?: string): PolicyRequest {
    const compiled = this.staticPolicy(policy);
    const params = compiled.staticParams!;
    const units = this.units(compiled, cost);
    let request = this.lastRequest;
    if (request === undefined || request.compiled !== compiled || request.params !== params || request.cost !== units) {
      request = this.lastRequest = { compiled, params, cost: units };
    }
    return key === undefined ? request : this.overridden(request, this.serviceKey(key));
  }

  /** `request` with the runtime override matching `known`'s tracker applied; `request` itself when none does. */
  overridden(request: PolicyRequest, known: ServiceKey): PolicyRequest {
    const { overrides } = this.engine;
    if (!overrides.active) return request;
    const entry = overrides.matchFor(known, request.compiled.name, known.tracker);
    return entry === undefined ? request : { ...request, params: overrides.params(request.compiled, request.params, entry) };
  }

  /**
   * A refund's or a penalty's request: its cost is a whole number from 1 to the policy's capacity (more can
   * never have been taken; more as a penalty is a lockout).
   */
  boundedRequest(what: 'refund' | 'penalty', policy: RateLimitPolicy, key: string, cost: number): PolicyRequest {
    const request = this.request(policy, 0, key);
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

  private learn(compiled: CompiledPolicy): CompiledPolicy {
    if (this.named.size >= MAX_NAMED && this.named.get(compiled.name) === undefined) this.named.delete(this.named.oldest()!);
    this.named.set(compiled.name, compiled);
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

/** A service call's `priority` (its criticality for a policy's `reserve`), checked: `undefined` is `'default'`. */
export function priorityOf(priority: unknown): RateLimitCriticality | undefined {
  if (priority === undefined || RATE_LIMIT_CRITICALITIES.includes(priority as RateLimitCriticality))
    return priority as RateLimitCriticality | undefined;
  throw new RateLimitConfigError(`priority: ${describeValue(priority)} must be 'critical', 'default' or 'sheddable'.`);
}

/** A service call's `key`: a non-empty string. */
export function assertKey(key: string): void {
  if (typeof key !== 'string' || key.length === 0) {
    throw new RateLimitConfigError(
      `key: ${describeValue(key)} must be a non-empty string ('ip:<address>', 'user:<id>', or what a by function returns).`,
    );
  }
}
