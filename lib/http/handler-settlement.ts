import type { CallHandler, ExecutionContext, NestInterceptor } from '@nestjs/common';
import type { Observable } from 'rxjs';
import { finalize, tap } from 'rxjs/operators';

/** Set on a request whose `concurrency` lease (or `settle`) waits until its handler has settled. */
const SETTLEMENT = Symbol('nestjs-redis-ratelimit:handler-settlement');

type Carrier = { [SETTLEMENT]?: HandlerSettlement };

/**
 * When the work of one request that holds a `concurrency` lease has ended: once its response is over (sent,
 * or the client went away) and, if its handler started, once the handler has settled too, whichever is
 * later. A client that aborts does not stop Nest from running the handler, so the socket closing alone
 * would free the lease while the work goes on. Until then the guard keeps the leases alive past their
 * `window` (`LeaseHeartbeats`), so a long handler keeps its slot.
 *
 * The guard attaches it to the request; {@link HandlerSettledInterceptor}, which runs only on routes that
 * hold leases, reports the handler starting and settling. Where no handler runs (a later guard rejected),
 * the end of the response alone ends the work. One gap remains: a client that leaves after the guard
 * decided but before the handler started (while a slower guard after ours runs) frees the lease then.
 */
export class HandlerSettlement {
  private running = false;
  private responseEnded = false;
  private done = false;
  private returnedValue: unknown;

  private constructor(private readonly end: () => void) {}

  /** Attaches a settlement calling `end` once to `request`; returns what to call when the response is over. */
  static attach(request: object, end: () => void): () => void {
    const settlement = new HandlerSettlement(end);
    (request as Carrier)[SETTLEMENT] = settlement;
    return () => settlement.ended();
  }

  /** The settlement attached to `request`, if its guard holds a lease for it. */
  static of(request: unknown): HandlerSettlement | undefined {
    return typeof request === 'object' && request !== null ? (request as Carrier)[SETTLEMENT] : undefined;
  }

  /**
   * What the handler returned (its observable's last value), for `settle` policies; `undefined` when it
   * threw, or has not run.
   */
  get result(): unknown {
    return this.returnedValue;
  }

  /** The handler returned (or emitted) `value`; `undefined` once it failed. */
  returned(value: unknown): void {
    this.returnedValue = value;
  }

  /** The handler is about to run (its pipes included). */
  started(): void {
    if (!this.done) this.running = true;
  }

  /** The handler's observable ended: completed, failed, or unsubscribed. */
  settled(): void {
    this.running = false;
    if (this.responseEnded) this.finish();
  }

  private ended(): void {
    this.responseEnded = true;
    if (!this.running) this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.end();
  }
}

/**
 * Tells a request's {@link HandlerSettlement} when its handler starts and settles, and what it returned.
 * Added at bootstrap only to the handlers of routes that hold `concurrency` leases or `settle` a cost (see
 * `RateLimitLeaseRoutes`): an interceptor in Nest's chain costs every request it runs for (a global one that
 * only passes through measured about +20 µs per request on Fastify), so no other route pays for it.
 * Stateless: one instance serves every app.
 */
export class HandlerSettledInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const settlement = context.getType() === 'http' ? HandlerSettlement.of(context.getArgByIndex<unknown>(0)) : undefined;
    if (!settlement) return next.handle();
    settlement.started();
    return next.handle().pipe(
      tap({ next: (value: unknown) => settlement.returned(value), error: () => settlement.returned(undefined) }),
      finalize(() => settlement.settled()),
    );
  }
}

/** The one {@link HandlerSettledInterceptor}, so adding it to a handler twice (two apps in one process) is seen. */
export const HANDLER_SETTLED: HandlerSettledInterceptor = Object.freeze(new HandlerSettledInterceptor());
