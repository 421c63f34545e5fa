import type { ExecutionContext } from '@nestjs/common';
import type { HeaderSink } from '../http/rate-limit-headers';
import type { TrackerSource } from '../http/tracker';
import type { RateLimitDecision } from '../interfaces/decision.interface';

/** Set on an execution context once a rate-limit guard has decided it. */
const CLAIMED = Symbol('nestjs-redis-ratelimit:claimed-context');

/** What a rejected call is answered with, before the transport shapes it. */
export interface RateLimitRejection {
  message: string;
  /** Whole seconds until the same call would be allowed; `null` when it never will be (cost above capacity). */
  retryAfter: number | null;
  /** Every policy's decision for the call. */
  decisions: readonly RateLimitDecision[];
}

/**
 * What a call refused for want of capacity is answered with, before the transport shapes it: this instance is
 * short of capacity (an adaptive limit or the load shedder refused the call), not the client of its quota.
 */
export interface RateLimitOverload {
  message: string;
  /** Whole seconds after which a retry may find capacity (always finite, at least 1). */
  retryAfter: number;
  /** The decisions behind the refusal: the adaptive policies' (none when the load shedder refused). */
  decisions: readonly RateLimitDecision[];
}

/** How a finished call ended, for policies that settle afterwards (`countOnly`, `concurrency`). */
export interface RateLimitCallOutcome {
  statusCode: number;
  aborted: boolean;
}

/**
 * One call as the guard sees it, whatever its transport: whose quota it draws from, where headers go, how
 * it ends, and what a rejection looks like to its client. One implementation per kind of context.
 */
export interface RateLimitContextAdapter extends TrackerSource, HeaderSink {
  /** Marks the call as decided; false when it already was (the guard applied both globally and locally). */
  claim(): boolean;
  /**
   * Calls `listener` once when the call is over; never where the transport has no such signal (ws, rpc).
   * With `untilHandlerSettles` (routes holding `concurrency` leases), not before the handler has settled
   * either, where the call can tell (HTTP controllers; a GraphQL call ends with its HTTP response).
   */
  onEnd(listener: (outcome: RateLimitCallOutcome) => void, untilHandlerSettles?: boolean): void;
  /**
   * Whether {@link onEnd} is certain to be called: an HTTP response always closes (a controller call, a
   * GraphQL operation over HTTP). Only such a call's `concurrency` leases are renewed while it runs; renewing
   * one whose end nobody hears would hold its slot until the app closes.
   */
  readonly hearsEnd: boolean;
  /** The error the call is rejected with (setting `Retry-After` where there is an HTTP response). */
  rejected(rejection: RateLimitRejection): Error;
  /** The error when the store failed and the policy is `fail-closed`. */
  unavailable(): Error;
  /**
   * The error when this instance is short of capacity (a 503 with `retryAfter`, setting `Retry-After` where
   * there is an HTTP response): the context's usual refusal, told apart from its 429.
   */
  overloaded(overload: RateLimitOverload): Error;
}

/**
 * Marks an execution context as decided. Nest hands every guard of one call the same context object, so a
 * second `RateLimitGuard` on that call (global and `@UseGuards`) sees the mark and does not count it again.
 */
export function claimContext(context: ExecutionContext): boolean {
  const marked = context as ExecutionContext & { [CLAIMED]?: true };
  if (marked[CLAIMED]) return false;
  marked[CLAIMED] = true;
  return true;
}

/**
 * `require(name)` at the moment it is needed, or `undefined` when the package is not installed: the
 * integrations (`@nestjs/websockets`, `@nestjs/microservices`) are optional peers, never loaded by the
 * library itself, and only ever needed by an app that already uses them.
 */
export function loadOptional<T>(name: string): T | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as T;
  } catch {
    return undefined;
  }
}

/** An exception class of a transport package (`WsException`, `RpcException`): built from an error payload. */
export type TransportExceptionClass = new (error: object) => Error;
