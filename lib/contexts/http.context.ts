import type { ExecutionContext } from '@nestjs/common';
import { HttpExchange, type HttpRequestLike, type HttpResponseLike } from '../http/http-exchange';
import type { IpTrackers } from '../http/tracker';
import { RateLimitExceededException, RateLimitOverloadedException, RateLimitStoreUnavailableException } from '../rate-limit.exception';
import type { RateLimitContextAdapter, RateLimitOverload, RateLimitRejection } from './rate-limit-context';

/**
 * A controller call (`context.getType() === 'http'`, Express or Fastify). Default tracker: `ip:<req.ip>`.
 * Rejected with {@link RateLimitExceededException} (429 with `Retry-After`), or when this instance is short of
 * capacity with {@link RateLimitOverloadedException} (503 with `Retry-After`).
 */
export class HttpRateLimitContext extends HttpExchange implements RateLimitContextAdapter {
  readonly hearsEnd = true;

  constructor(context: ExecutionContext) {
    // The arguments `switchToHttp()` would return, read directly: Nest's `switchToHttp()` assigns three new
    // closures onto the context on every call, and this runs for every request.
    super(context.getArgByIndex<HttpRequestLike>(0), context.getArgByIndex<HttpResponseLike>(1));
  }

  defaultTracker(ips: IpTrackers): string {
    return ips.of(this.ip);
  }

  get user(): unknown {
    return this.request.user;
  }

  /** Where {@link user} is read from, for the warning about a `by: 'user'` call without one. */
  get userSource(): string {
    return 'req.user';
  }

  rejected(rejection: RateLimitRejection): Error {
    return httpRejection(this, rejection);
  }

  unavailable(): Error {
    return new RateLimitStoreUnavailableException();
  }

  overloaded({ message, retryAfter, decisions }: RateLimitOverload): Error {
    this.setHeader('Retry-After', String(retryAfter));
    return new RateLimitOverloadedException(message, retryAfter, decisions);
  }
}

/** The 429 exception, after setting `Retry-After` on the response when the wait is finite. */
export function httpRejection(exchange: HttpExchange | undefined, { message, retryAfter, decisions }: RateLimitRejection): Error {
  if (retryAfter !== null) exchange?.setHeader('Retry-After', String(retryAfter));
  return new RateLimitExceededException(message, retryAfter, decisions);
}
