import { Inject, Injectable } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
import { RateLimitConfigError } from './errors/rate-limit-config.error';
import type { RateLimitDecision } from './interfaces/decision.interface';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import type { RateLimitPolicy } from './interfaces/policy.interface';
import { RateLimitEngine, type PolicyRequest } from './rate-limit.engine';
import { RATE_LIMIT_OPTIONS } from './rate-limit.module-definition';
import { compilePolicy, cost as validCost, type CompiledPolicy } from './utils/compile-policy';
import { trackerKeyPrefix } from './utils/keys';

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
  private readonly prefix: string;

  constructor(
    private readonly engine: RateLimitEngine,
    private readonly registry: RateLimitAlgorithmRegistry,
    @Inject(RATE_LIMIT_OPTIONS) options: RateLimitModuleOptions,
  ) {
    this.prefix = options.prefix ?? 'rl';
  }

  /** Takes `cost` units (default 1) from `key`'s quota under `policy`; a rejection takes nothing. */
  async consume(policy: RateLimitPolicy, key: string, options: ConsumeOptions = {}): Promise<RateLimitDecision> {
    const result = await this.engine.decide(this.trackerPrefix(key), [this.request(policy, options.cost)], 'consume');
    return result.decisions[0];
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
  async peek(policy: RateLimitPolicy, key: string, options: ConsumeOptions = {}): Promise<RateLimitDecision> {
    const result = await this.engine.decide(this.trackerPrefix(key), [this.request(policy, options.cost)], 'peek');
    return result.decisions[0];
  }

  /** Restores `key`'s full quota under `policy` and lifts any lockout. */
  async reset(policy: RateLimitPolicy, key: string): Promise<void> {
    const [call] = this.engine.calls(this.trackerPrefix(key), [this.request(policy, 0)]);
    await this.engine.store.delete([call.stateKey, call.blockKey]);
  }

  private trackerPrefix(key: string): string {
    if (typeof key !== 'string' || key.length === 0) {
      throw new RateLimitConfigError(`key: ${JSON.stringify(key)} must be a non-empty string (a user id, an API key, an IP…).`);
    }
    return trackerKeyPrefix(this.prefix, key);
  }

  private request(policy: RateLimitPolicy, cost: number | undefined): PolicyRequest {
    const compiled = this.compile(policy);
    if (!compiled.staticParams) {
      throw new RateLimitConfigError(`RateLimiterService: policy '${compiled.name}' computes its limit or window from the request context, which a programmatic call does not have; pass numbers.`);
    }
    const units = cost === undefined ? compiled.staticCost : validCost(cost, 'cost');
    if (units === undefined) {
      throw new RateLimitConfigError(`RateLimiterService: policy '${compiled.name}' computes its cost from the request context; pass { cost } to the call.`);
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

function assertDistinctNames(requests: readonly PolicyRequest[]): void {
  const names = new Set<string>();
  for (const { compiled } of requests) {
    if (names.has(compiled.name)) {
      throw new RateLimitConfigError(`consumeAll: two policies are named '${compiled.name}'; give each policy of one call its own name.`);
    }
    names.add(compiled.name);
  }
}
