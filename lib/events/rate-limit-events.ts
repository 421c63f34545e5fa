import { IntervalWarning } from '../shared/interval-warning';
import type { RateLimitHooks } from '../interfaces/module-options.interface';
import type { RateLimitOverrideEvent } from '../interfaces/override.interface';
import type { RateLimitSheddingEvent } from '../interfaces/overload.interface';

/**
 * Names under which `RateLimitEventEmitterModule` (`nestjs-redis-ratelimit/event-emitter`) re-emits the
 * events on `@nestjs/event-emitter`. The payloads are those of {@link RateLimitHooks}.
 * @example @OnEvent(RATE_LIMIT_EVENTS.rejected) audit(event: RateLimitDecisionEvent) { ... }
 */
export const RATE_LIMIT_EVENTS = {
  /** Every decision ({@link RateLimitDecisionEvent}). */
  decision: 'rate-limit.decision',
  /** Decisions that rejected the request ({@link RateLimitDecisionEvent}, `allowed: false`). */
  rejected: 'rate-limit.rejected',
  /** Every store failure or missed deadline (`Error`). */
  storeError: 'rate-limit.store-error',
  /**
   * Each allowed policy decision at or under `nearLimitRatio` of its limit (its `RateLimitDecision`; see
   * {@link RateLimitHooks.nearLimit}).
   */
  nearLimit: 'rate-limit.near-limit',
  /**
   * Each change to the runtime overrides an instance applies: applied, removed or expired
   * ({@link RateLimitOverrideEvent}; see {@link RateLimitHooks.override}).
   */
  override: 'rate-limit.override',
  /**
   * Each change of what the load shedder (`loadShedding`) refuses ({@link RateLimitSheddingEvent}; see
   * {@link RateLimitHooks.shedding}).
   */
  shedding: 'rate-limit.shedding',
} as const;

/**
 * The in-process event bus of one `RateLimitModule`: every decision, every near-limit policy decision and
 * every store error, typed, with no peer dependency and no store round trip. The module's `hooks` option is called first, then each
 * subscriber, synchronously and in order; a listener that throws is logged (rate-limited) and never fails
 * the request. Injectable wherever `RateLimitModule` is visible (it is global by default).
 * @example
 * constructor(events: RateLimitEvents) {
 *   events.subscribe({
 *     decision: (e) => { if (!e.allowed) audit(e.decisions); },
 *     nearLimit: (d) => warnCustomer(d.policy, d.remaining),
 *   });
 * }
 */
export class RateLimitEvents {
  /** A listener failure is logged at most once per 10 s. */
  private readonly listenerFailure = new IntervalWarning('RateLimitEvents');
  private listeners: RateLimitHooks[] = [];

  /**
   * What the engine and the store call: publishes to the options' hooks and every subscriber.
   * Pass it as `hooks` wherever the module's options are handed on. `decision` is absent while nobody
   * listens to decisions, so an unobserved decision costs no clock reads and no event object; `nearLimit`
   * likewise, so nothing compares `remaining` with the limit unless someone wants to know.
   */
  readonly hooks: RateLimitHooks = { storeError: (error) => this.publish('storeError', error) };
  private readonly publishDecision: NonNullable<RateLimitHooks['decision']> = (event) => this.publish('decision', event);
  private readonly publishNearLimit: NonNullable<RateLimitHooks['nearLimit']> = (decision) => this.publish('nearLimit', decision);
  private readonly publishOverride: NonNullable<RateLimitHooks['override']> = (event: RateLimitOverrideEvent) =>
    this.publish('override', event);
  private readonly publishShedding: NonNullable<RateLimitHooks['shedding']> = (event: RateLimitSheddingEvent) =>
    this.publish('shedding', event);

  /** @param optionHooks the module's `hooks` option, called before any subscriber. */
  constructor(optionHooks?: RateLimitHooks) {
    if (optionHooks) this.listeners.push(optionHooks);
    this.listen();
  }

  /**
   * Calls `listener.decision` for every decision, `listener.nearLimit` for every near-limit policy decision,
   * `listener.storeError` for every store error, `listener.override` for every runtime override change
   * applied and `listener.shedding` for every change of the load shedder's level, until the returned function is called. Keep listeners cheap: they run on the request path.
   */
  subscribe(listener: RateLimitHooks): () => void {
    this.listeners = [...this.listeners, listener];
    this.listen();
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener);
      this.listen();
    };
  }

  /** Offers the decision and near-limit hooks exactly while some listener has one. */
  private listen(): void {
    this.hooks.decision = this.listeners.some((l) => l.decision) ? this.publishDecision : undefined;
    this.hooks.nearLimit = this.listeners.some((l) => l.nearLimit) ? this.publishNearLimit : undefined;
    this.hooks.override = this.listeners.some((l) => l.override) ? this.publishOverride : undefined;
    this.hooks.shedding = this.listeners.some((l) => l.shedding) ? this.publishShedding : undefined;
  }

  private publish<K extends keyof RateLimitHooks>(kind: K, payload: Parameters<Required<RateLimitHooks>[K]>[0]): void {
    // Subscribing replaces the array, so this loop walks a snapshot even if a listener unsubscribes.
    for (const listener of this.listeners) {
      try {
        (listener[kind] as ((payload: unknown) => void) | undefined)?.(payload);
      } catch (error) {
        this.warnListener(kind, error);
      }
    }
  }

  private warnListener(kind: keyof RateLimitHooks, error: unknown): void {
    this.listenerFailure.warn(() => `a rate-limit ${kind} listener threw (ignored): ${(error as Error)?.message ?? String(error)}`);
  }
}
