import { Injectable, Module, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { EventEmitter2 } from '@nestjs/event-emitter';
import { RATE_LIMIT_EVENTS, RateLimitEvents } from '../events/rate-limit-events';

/** Re-emits what {@link RateLimitEvents} publishes on the app's `EventEmitter2`. */
@Injectable()
export class RateLimitEventEmitterBridge implements OnModuleInit, OnModuleDestroy {
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly events: RateLimitEvents,
    private readonly emitter: EventEmitter2,
  ) {}

  onModuleInit(): void {
    this.unsubscribe = this.events.subscribe({
      decision: (event) => {
        this.emitter.emit(RATE_LIMIT_EVENTS.decision, event);
        if (!event.allowed) this.emitter.emit(RATE_LIMIT_EVENTS.rejected, event);
      },
      nearLimit: (decision) => this.emitter.emit(RATE_LIMIT_EVENTS.nearLimit, decision),
      storeError: (error) => this.emitter.emit(RATE_LIMIT_EVENTS.storeError, error),
      override: (event) => this.emitter.emit(RATE_LIMIT_EVENTS.override, event),
      shedding: (event) => this.emitter.emit(RATE_LIMIT_EVENTS.shedding, event),
    });
  }

  onModuleDestroy(): void {
    this.unsubscribe?.();
  }
}

/**
 * Emits the rate limiter's events on `@nestjs/event-emitter` (an optional peer dependency), under the names
 * of {@link RATE_LIMIT_EVENTS}: `rate-limit.decision` and `rate-limit.rejected` with a
 * `RateLimitDecisionEvent`, `rate-limit.near-limit` with the policy's `RateLimitDecision` (see the module's
 * `nearLimitRatio`), `rate-limit.store-error` with the `Error`, `rate-limit.override` with a
 * `RateLimitOverrideEvent` (a runtime override applied, removed or expired). Needs `EventEmitterModule.forRoot()`
 * and `RateLimitModule` (both global by default). Listeners run synchronously on the request path unless
 * declared `@OnEvent(name, { async: true })`.
 * @example
 * imports: [EventEmitterModule.forRoot(), RateLimitModule.forRoot({ redis }), RateLimitEventEmitterModule]
 * // elsewhere: @OnEvent(RATE_LIMIT_EVENTS.rejected) onRejected(event: RateLimitDecisionEvent) { ... }
 */
@Module({ providers: [RateLimitEventEmitterBridge] })
export class RateLimitEventEmitterModule {}
