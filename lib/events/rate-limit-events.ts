import { Logger } from '@nestjs/common';
import type { RateLimitHooks } from '../interfaces/module-options.interface';

/** A listener failure is logged at most this often. */
const WARN_INTERVAL_MS = 10_000;

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
} as const;

/**
 * The in-process event bus of one `RateLimitModule`: every decision and every store error, typed, with no
 * peer dependency and no store round trip. The module's `hooks` option is called first, then each
 * subscriber, synchronously and in order; a listener that throws is logged (rate-limited) and never fails
 * the request. Injectable wherever `RateLimitModule` is visible (it is global by default).
 * @example
 * constructor(events: RateLimitEvents) {
 *   events.subscribe({ decision: (e) => { if (!e.allowed) audit(e.decisions); } });
 * }
 */
export class RateLimitEvents {
  private readonly logger = new Logger('RateLimitEvents');
  private listeners: RateLimitHooks[] = [];
  private lastWarnAt = -Infinity;

  /**
   * What the engine and the store call: publishes to the options' hooks and every subscriber.
   * Pass it as `hooks` wherever the module's options are handed on. `decision` is absent while nobody
   * listens to decisions, so an unobserved decision costs no clock reads and no event object.
   */
  readonly hooks: RateLimitHooks = { storeError: (error) => this.publish('storeError', error) };
  private readonly publishDecision: NonNullable<RateLimitHooks['decision']> = (event) => this.publish('decision', event);

  /** @param optionHooks the module's `hooks` option, called before any subscriber. */
  constructor(optionHooks?: RateLimitHooks) {
    if (optionHooks) this.listeners.push(optionHooks);
    this.listen();
  }

  /**
   * Calls `listener.decision` for every decision and `listener.storeError` for every store error until the
   * returned function is called. Keep listeners cheap: they run on the request path.
   */
  subscribe(listener: RateLimitHooks): () => void {
    this.listeners = [...this.listeners, listener];
    this.listen();
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener);
      this.listen();
    };
  }

  /** Offers the decision hook exactly while some listener has one. */
  private listen(): void {
    this.hooks.decision = this.listeners.some((l) => l.decision) ? this.publishDecision : undefined;
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
    const now = Date.now();
    if (now - this.lastWarnAt < WARN_INTERVAL_MS) return;
    this.lastWarnAt = now;
    this.logger.warn(`a rate-limit ${kind} listener threw (ignored): ${(error as Error)?.message ?? String(error)}`);
  }
}
