import { HttpException, HttpStatus } from '@nestjs/common';
import type { RateLimitDecision } from './interfaces/decision.interface';

/** JSON body of a 429. */
export interface RateLimitExceededBody {
  statusCode: 429;
  message: string;
  error: 'Too Many Requests';
  /** Whole seconds until the same request would be allowed (the `Retry-After` value); `null` when never. */
  retryAfter: number | null;
}

/**
 * Thrown by {@link RateLimitGuard} when a policy rejects a request: HTTP 429 with a `Retry-After` header.
 * `decisions` holds every policy's decision, for exception filters that want to shape their own response.
 */
export class RateLimitExceededException extends HttpException {
  /** Seconds until the same request would be allowed; `null` when it can never be (cost above capacity). */
  readonly retryAfter: number | null;
  /** Every policy's decision for the rejected request. */
  readonly decisions: readonly RateLimitDecision[];

  constructor(message: string, retryAfter: number | null, decisions: readonly RateLimitDecision[] = []) {
    const body = (new.target as typeof RateLimitExceededException).responseBody(message, retryAfter);
    // A 429 is an expected answer, not a bug: capturing its stack trace cost ~7 µs per rejected request.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(body, HttpStatus.TOO_MANY_REQUESTS);
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
    this.retryAfter = retryAfter;
    this.decisions = decisions;
  }

  /** What `getResponse()` returns (the JSON body of the 429); a subclass may answer with another. */
  protected static responseBody(message: string, retryAfter: number | null): object {
    const body: RateLimitExceededBody = { statusCode: HttpStatus.TOO_MANY_REQUESTS, message, error: 'Too Many Requests', retryAfter };
    return body;
  }
}

/** `extensions` of the GraphQL error of a field the guard rejected. */
export interface RateLimitGraphqlErrorExtensions {
  code: 'RATE_LIMITED';
  /** Whole seconds until the same field would be allowed; `null` when never (cost above capacity). */
  retryAfter: number | null;
}

/**
 * Thrown by {@link RateLimitGuard} when a policy rejects a GraphQL resolver call: a
 * {@link RateLimitExceededException} (exception filters, `getStatus()` 429) whose `extensions` graphql-js
 * copies onto the field's error: `{ code: 'RATE_LIMITED', retryAfter }`.
 *
 * Its `getResponse()` body has no `statusCode`: `@nestjs/apollo` rewrites the `extensions.code` of any error
 * whose `getResponse()` has a `statusCode` (an HTTP exception) to `INTERNAL_SERVER_ERROR` (only 400, 401,
 * 403 and 422 get their own codes), which would hide that the field was rate limited.
 */
export class GraphqlRateLimitExceededException extends RateLimitExceededException {
  /** The GraphQL error's `extensions`. */
  readonly extensions: RateLimitGraphqlErrorExtensions;

  constructor(message: string, retryAfter: number | null, decisions: readonly RateLimitDecision[] = []) {
    super(message, retryAfter, decisions);
    this.extensions = { code: 'RATE_LIMITED', retryAfter };
  }

  protected static override responseBody(message: string, retryAfter: number | null): object {
    return { message, error: 'Too Many Requests', retryAfter };
  }
}

/**
 * Thrown by {@link RateLimitGuard} when the store failed and `onStoreError: 'fail-closed'` rejects the
 * request: HTTP 503, so clients and dashboards can tell "limited" from "limiter down".
 */
export class RateLimitStoreUnavailableException extends HttpException {
  constructor(message = 'Rate limit store unavailable') {
    super({ statusCode: HttpStatus.SERVICE_UNAVAILABLE, message, error: 'Service Unavailable' }, HttpStatus.SERVICE_UNAVAILABLE);
  }
}
