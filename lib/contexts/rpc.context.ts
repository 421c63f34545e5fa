import type { ExecutionContext } from '@nestjs/common';
import { RateLimitExceededException, RateLimitOverloadedException, RateLimitStoreUnavailableException } from '../rate-limit.exception';
import {
  claimContext,
  loadOptional,
  type RateLimitContextAdapter,
  type RateLimitOverload,
  type RateLimitRejection,
  type TransportExceptionClass,
} from './rate-limit-context';

/** The transport contexts' accessors for the pattern a message was sent to, by transport. */
interface TransportContextLike {
  /** TCP, RabbitMQ. */
  getPattern?(): unknown;
  /** NATS. */
  getSubject?(): unknown;
  /** Redis. */
  getChannel?(): unknown;
  /** Kafka, MQTT. */
  getTopic?(): unknown;
}

/** What a rejected message's sender receives as the error (`ClientProxy#send` errors with this object). */
export interface RateLimitRpcErrorPayload {
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
 * A microservice message (`context.getType() === 'rpc'`). Default tracker: `rpc:<pattern>`, the pattern as
 * the transport received it (TCP: the string, or the JSON of an object pattern such as `{"cmd":"sum"}`;
 * `Class.handler` when the transport has none, e.g. gRPC), followed by `:userId=<v>` or else `:id=<v>` when
 * the message data has such a string or number field. `'ip'` and `'user'` have no meaning here and mean
 * that default. Rejected with an `RpcException` whose error is a {@link RateLimitRpcErrorPayload} (`statusCode`
 * 429 when limited, 503 with `retryAfter` when this instance is short of capacity). Messages
 * have no end signal, so `concurrency` leases live until their `window` and `countOnly` counts every message.
 */
export class RpcRateLimitContext implements RateLimitContextAdapter {
  readonly user = undefined;
  readonly hearsEnd = false;

  constructor(private readonly context: ExecutionContext) {}

  claim(): boolean {
    return claimContext(this.context);
  }

  defaultTracker(): string {
    const rpc = this.context.switchToRpc();
    return `rpc:${this.pattern(rpc.getContext<TransportContextLike | undefined>())}${identity(rpc.getData<unknown>())}`;
  }

  setHeader(): void {
    // A microservice message has no response headers.
  }

  onEnd(): void {
    // A microservice message has no end signal the guard can see.
  }

  rejected({ message, retryAfter, decisions }: RateLimitRejection): Error {
    return rpcException({ statusCode: 429, message, retryAfter }) ?? new RateLimitExceededException(message, retryAfter, decisions);
  }

  unavailable(): Error {
    return rpcException({ statusCode: 503, message: 'Rate limit store unavailable' }) ?? new RateLimitStoreUnavailableException();
  }

  overloaded({ message, retryAfter, decisions }: RateLimitOverload): Error {
    return rpcException({ statusCode: 503, message, retryAfter }) ?? new RateLimitOverloadedException(message, retryAfter, decisions);
  }

  private pattern(transport: TransportContextLike | undefined): string {
    for (const accessor of ['getPattern', 'getSubject', 'getChannel', 'getTopic'] as const) {
      const read = transport?.[accessor];
      const value: unknown = typeof read === 'function' ? read.call(transport) : undefined;
      if (typeof value === 'string' && value !== '') return value;
    }
    return `${this.context.getClass().name}.${this.context.getHandler().name}`;
  }
}

/** `:userId=<v>`, else `:id=<v>`, from the message data; `''` when it has neither as a string or number. */
function identity(data: unknown): string {
  if (data === null || typeof data !== 'object') return '';
  const { userId, id } = data as { userId?: unknown; id?: unknown };
  if (isIdentifier(userId)) return `:userId=${userId}`;
  return isIdentifier(id) ? `:id=${id}` : '';
}

function isIdentifier(value: unknown): value is string | number {
  return (typeof value === 'string' && value !== '') || (typeof value === 'number' && Number.isFinite(value));
}

/** An `RpcException` carrying `payload`; `undefined` if `@nestjs/microservices` is somehow not installed. */
function rpcException(payload: RateLimitRpcErrorPayload): Error | undefined {
  const RpcException = loadOptional<{ RpcException: TransportExceptionClass }>('@nestjs/microservices')?.RpcException;
  return RpcException && new RpcException(payload);
}
