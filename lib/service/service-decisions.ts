import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitPolicy } from '../interfaces/policy.interface';
import type { ConsumeOptions, LeaseOptions, MultiDecision, RateLimitLease } from '../interfaces/service.interface';
import type { EngineDecision, PolicyRequest } from '../pipeline/rate-limit.engine';
import { MAX_POLICIES_PER_DECISION, type DecisionMode } from '../stores/store.interface';
import { penalizeIn } from '../stores/store-health';
import { leaseOf } from './lease';
import { assertReservable, reservationOf, type RateLimitReservation } from './reservation';
import { priorityOf, type ServiceCalls } from './service-calls';

/**
 * What `RateLimiterService` decides, on the engine its {@link ServiceCalls} share: one policy's decision
 * (`consume`, `peek`), every policy's at once (`consumeAll`, `reserve`), a refund, a penalty, a lease. The
 * service keeps the public methods and their documentation, and delegates here; each method checks its input
 * and throws as the service's method of the same name did.
 */
export class ServiceDecisions {
  constructor(private readonly calls: ServiceCalls) {}

  /**
   * One policy's decision as one promise, however the store answers: an in-process answer (memory store, a
   * shed hot key) is not awaited again. Bad input rejects the promise, as it would from an `async` method.
   */
  one(policy: RateLimitPolicy, key: string, options: ConsumeOptions, mode: DecisionMode): Promise<RateLimitDecision> {
    try {
      const { engine } = this.calls;
      const known = this.calls.serviceKey(key);
      const request = this.calls.overridden(this.calls.request(policy, options.cost), known);
      const plain =
        mode === 'consume' && engine.takesPlain(request)
          ? engine.consumePlain(this.calls.stateSlot(known, request.compiled), request)
          : undefined;
      if (plain !== undefined) return Promise.resolve(plain);
      const result = engine.decideNowOrLater(known.keys, [request], mode, priorityOf(options.priority));
      return result instanceof Promise ? result.then(this.openDecision) : Promise.resolve(firstDecision(result));
    } catch (error) {
      return Promise.reject(error as Error);
    }
  }

  /** `consumeAll`: takes from every policy atomically, in one store call (distinct names). */
  async all(policies: readonly RateLimitPolicy[], key: string, options: ConsumeOptions): Promise<MultiDecision> {
    const requests = policies.map((policy) => this.calls.request(policy, options.cost, key));
    assertDistinctNames(requests);
    const { allowed, decisions } = await this.calls.engine.decide(
      this.calls.trackerKeys(key),
      requests,
      'consume',
      priorityOf(options.priority),
    );
    this.calls.assertOpen();
    return { allowed, decisions };
  }

  /** `reserve`: takes the estimate from every policy atomically, and returns the reservation that settles it. */
  async reserve(
    policies: RateLimitPolicy | readonly RateLimitPolicy[],
    key: string,
    options: ConsumeOptions,
  ): Promise<RateLimitReservation> {
    const requests = ([] as RateLimitPolicy[])
      .concat(policies)
      .map((policy): PolicyRequest => ({ ...this.calls.request(policy, options.cost, key), settled: true }));
    assertReservable(requests);
    const result = await this.calls.engine.decide(this.calls.trackerKeys(key), requests, 'consume', priorityOf(options.priority));
    this.calls.assertOpen();
    return reservationOf(this.calls.engine, result, () => this.calls.assertOpen());
  }

  /** `refund`: gives back `cost` units (a whole number from 1 to the policy's capacity). */
  async refund(policy: RateLimitPolicy, key: string, cost: number): Promise<void> {
    await this.calls.engine.refund(
      this.calls.engine.calls(this.calls.trackerKeys(key), [this.calls.boundedRequest('refund', policy, key, cost)]),
    );
  }

  /** `penalty`: charges `cost` units whatever the counter says, and reports the decision after the charge. */
  async penalty(policy: RateLimitPolicy, key: string, cost: number): Promise<RateLimitDecision> {
    const request = this.calls.boundedRequest('penalty', policy, key, cost);
    if (request.compiled.algorithm.name === 'concurrency') {
      throw new RateLimitConfigError(
        `penalty: policy '${request.compiled.name}' uses 'concurrency', which takes leases; penalties need a counter.`,
      );
    }
    const calls = this.calls.engine.calls(this.calls.trackerKeys(key), [request]);
    const { verdicts } = await penalizeIn(this.calls.engine.store, calls);
    this.calls.assertOpen();
    return this.calls.engine.toDecisions([request], verdicts)[0];
  }

  /** `lease`: takes a `concurrency` lease, and returns its handle. */
  async lease(policy: RateLimitPolicy, key: string, options: LeaseOptions): Promise<RateLimitLease> {
    const request = this.calls.request(policy, undefined, key);
    if (request.compiled.algorithm.name !== 'concurrency') {
      throw new RateLimitConfigError(
        `lease: policy '${request.compiled.name}' uses '${request.compiled.algorithm.name}'; leases need algorithm 'concurrency'.`,
      );
    }
    const { decisions, calls } = await this.calls.engine.decide(
      this.calls.trackerKeys(key),
      [request],
      'consume',
      priorityOf(options.priority),
    );
    this.calls.assertOpen();
    return leaseOf(this.calls.engine, request.compiled, decisions[0], calls, () => this.calls.assertOpen());
  }

  /** The first decision of a result that arrived; rejects it when the module closed meanwhile. */
  private readonly openDecision = (result: EngineDecision): RateLimitDecision => {
    this.calls.assertOpen();
    return result.decisions[0];
  };
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
