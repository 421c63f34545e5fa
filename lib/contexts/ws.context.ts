import type { ExecutionContext } from '@nestjs/common';
import type { IpTrackers } from '../http/tracker';
import { RateLimitExceededException, RateLimitOverloadedException, RateLimitStoreUnavailableException } from '../rate-limit.exception';
import {
  claimContext,
  loadOptional,
  type RateLimitContextAdapter,
  type RateLimitOverload,
  type RateLimitRejection,
  type TransportExceptionClass,
} from './rate-limit-context';

/** The parts of a socket.io `Socket` read here. */
interface SocketLike {
  handshake?: { address?: string };
  data?: { user?: unknown };
  user?: unknown;
}

/** What a rejected WebSocket message's client receives as the payload of its `exception` event. */
export interface RateLimitWsErrorPayload {
  status: 'error';
  /**
   * 429 when limited (by the `insurance` fallback too); 503 when this instance is short of capacity (the load
   * shedder refused the message; it carries `retryAfter`) or when the store is down and the policy fails
   * closed (no `retryAfter`).
   */
  statusCode: 429 | 503;
  message: string;
  /** Whole seconds until the same message would be allowed; `null` when never (429 only). */
  retryAfter?: number | null;
}

/**
 * A gateway message (`context.getType() === 'ws'`). Default tracker: `ip:<address>` of the socket.io
 * handshake (`client.handshake.address`; proxies' headers are not read). `by: 'user'` reads
 * `client.data.user`, else `client.user`. Rejected with a `WsException` whose payload is a
 * {@link RateLimitWsErrorPayload}, which Nest's WebSocket exception filter emits to the client as an
 * `exception` event (`statusCode` 429 when limited, 503 with `retryAfter` when this instance is short of
 * capacity); the connection stays open. WebSocket messages have no end signal, so `concurrency`
 * leases live until their `window` and `countOnly` policies count every message.
 */
export class WsRateLimitContext implements RateLimitContextAdapter {
  readonly hearsEnd = false;
  private readonly client: SocketLike;

  constructor(private readonly context: ExecutionContext) {
    this.client = context.switchToWs().getClient<SocketLike | undefined>() ?? {};
  }

  claim(): boolean {
    return claimContext(this.context);
  }

  defaultTracker(ips: IpTrackers): string {
    return ips.of(this.client.handshake?.address);
  }

  get user(): unknown {
    return this.client.data?.user ?? this.client.user;
  }

  /** Where {@link user} is read from, for the warning about a `by: 'user'` call without one. */
  get userSource(): string {
    return 'client.data.user or client.user';
  }

  setHeader(): void {
    // A WebSocket message has no response headers.
  }

  onEnd(): void {
    // A WebSocket message has no end signal.
  }

  rejected({ message, retryAfter, decisions }: RateLimitRejection): Error {
    const payload: RateLimitWsErrorPayload = { status: 'error', statusCode: 429, message, retryAfter };
    return wsException(payload) ?? new RateLimitExceededException(message, retryAfter, decisions);
  }

  unavailable(): Error {
    const payload: RateLimitWsErrorPayload = { status: 'error', statusCode: 503, message: 'Rate limit store unavailable' };
    return wsException(payload) ?? new RateLimitStoreUnavailableException();
  }

  overloaded({ message, retryAfter, decisions }: RateLimitOverload): Error {
    const payload: RateLimitWsErrorPayload = { status: 'error', statusCode: 503, message, retryAfter };
    return wsException(payload) ?? new RateLimitOverloadedException(message, retryAfter, decisions);
  }
}

/** A `WsException` carrying `payload`; `undefined` if `@nestjs/websockets` is somehow not installed. */
function wsException(payload: RateLimitWsErrorPayload): Error | undefined {
  const WsException = loadOptional<{ WsException: TransportExceptionClass }>('@nestjs/websockets')?.WsException;
  return WsException && new WsException(payload);
}
