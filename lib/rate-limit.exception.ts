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
 * Thrown by {@link RateLimitGuard} when a policy rejects a request: HTTP 429 with a `Retry-After` header. While
 * the store is down, a rejection by the `insurance` fallback (the default `onStoreError`) is one too: its
 * rejecting decisions have `reason: 'store-unavailable'`. `decisions` holds every policy's decision, for
 * exception filters that want to shape their own response.
 */
export class RateLimitExceededException extends HttpException {
  /** Seconds until the same request would be allowed; `null` when it can never be (cost above capacity). */
  readonly retryAfter: number | null;
  /** Every policy's decision for the rejected request. */
  readonly decisions: readonly RateLimitDecision[];

  constructor(message: string, retryAfter: number | null, decisions: readonly RateLimitDecision[] = []) {
    const body = (new.target as typeof RateLimitExceededException).responseBody(message, retryAfter, decisions);
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
  protected static responseBody(message: string, retryAfter: number | null, _decisions: readonly RateLimitDecision[]): object {
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
 * request: HTTP 503, so clients and dashboards can tell "limited" from "limiter down". Only then: the
 * `insurance` fallback's rejections are {@link RateLimitExceededException}s (429).
 */
export class RateLimitStoreUnavailableException extends HttpException {
  constructor(message = 'Rate limit store unavailable') {
    super((new.target as typeof RateLimitStoreUnavailableException).responseBody(message), HttpStatus.SERVICE_UNAVAILABLE);
  }

  /** What `getResponse()` returns (the JSON body of the 503); a subclass may answer with another. */
  protected static responseBody(message: string): object {
    return { statusCode: HttpStatus.SERVICE_UNAVAILABLE, message, error: 'Service Unavailable' };
  }
}

/**
 * The problem type of draft-ietf-httpapi-ratelimit-headers for a request beyond its quota (its "Problem Types"
 * section; IANA "HTTP Problem Types" registry, recommended status 429).
 */
export const RATE_LIMIT_QUOTA_EXCEEDED_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded';

/** Media type of an RFC 9457 problem details body in JSON. */
export const PROBLEM_JSON_CONTENT_TYPE = 'application/problem+json';

/**
 * The 429 body with `errorFormat: 'problem+json'`: RFC 9457 problem details of the draft's `quota-exceeded`
 * type. `instance` is not sent: it identifies one occurrence, which only the app can name.
 */
export interface RateLimitProblemDetails {
  type: typeof RATE_LIMIT_QUOTA_EXCEEDED_TYPE;
  /** The title the draft registers for the type. */
  title: 'Quota Exceeded';
  status: 429;
  /** `errorMessage` (with why retrying will not help, when the cost can never fit). */
  detail: string;
  /**
   * Names of the policies whose quota was exceeded, in the route's order: under `headerProfile: 'draft-11'`,
   * the policies the 429's `RateLimit` field lists (those the store decided), so that no `t` beside
   * `Retry-After` outlasts it.
   */
  'violated-policies': string[];
}

/**
 * The 503 body with `errorFormat: 'problem+json'`: RFC 9457's `about:blank` type, which means the status
 * code says it all (the draft's `temporary-reduced-capacity` is about the server's capacity, not about the
 * limiter's store being down).
 */
export interface RateLimitStoreUnavailableProblemDetails {
  type: 'about:blank';
  title: 'Service Unavailable';
  status: 503;
  detail: string;
}

/**
 * The {@link RateLimitExceededException} of `errorFormat: 'problem+json'`: its `getResponse()` is
 * {@link RateLimitProblemDetails}. The guard sets `Content-Type: application/problem+json` on the response
 * before throwing it, and Nest's exception filter keeps that type on Express and Fastify; a filter of yours
 * that answers with another body sets its own `Content-Type`.
 */
export class RateLimitExceededProblemException extends RateLimitExceededException {
  protected static override responseBody(message: string, _retryAfter: number | null, decisions: readonly RateLimitDecision[]): object {
    const body: RateLimitProblemDetails = {
      type: RATE_LIMIT_QUOTA_EXCEEDED_TYPE,
      title: 'Quota Exceeded',
      status: HttpStatus.TOO_MANY_REQUESTS,
      detail: message,
      'violated-policies': decisions.filter((d) => !d.allowed && d.reason !== 'shadow').map((d) => d.policy),
    };
    return body;
  }
}

/**
 * The {@link RateLimitStoreUnavailableException} of `errorFormat: 'problem+json'`: its `getResponse()` is
 * {@link RateLimitStoreUnavailableProblemDetails}, sent as `application/problem+json`.
 */
export class RateLimitStoreUnavailableProblemException extends RateLimitStoreUnavailableException {
  protected static override responseBody(message: string): object {
    const body: RateLimitStoreUnavailableProblemDetails = {
      type: 'about:blank',
      title: 'Service Unavailable',
      status: HttpStatus.SERVICE_UNAVAILABLE,
      detail: message,
    };
    return body;
  }
}

/** JSON body of a 503 from an adaptive limit: the instance is at its capacity for now. */
export interface RateLimitOverloadedBody {
  statusCode: 503;
  message: string;
  error: 'Service Unavailable';
  /** Whole seconds after which a retry may find a free slot (the `Retry-After` value). */
  retryAfter: number;
}

/**
 * Thrown by {@link RateLimitGuard} when an adaptive limit (`algorithm: 'adaptive'`) refuses a request: HTTP
 * 503 with `Retry-After`, as it is this instance's capacity, not the client's quota, that is exhausted (a
 * plain rate limit keeps its 429). `decisions` holds the adaptive policies' decisions.
 */
export class RateLimitOverloadedException extends HttpException {
  /** Seconds after which a retry may find a free slot. */
  readonly retryAfter: number;
  /** The decisions of the route's adaptive policies. */
  readonly decisions: readonly RateLimitDecision[];

  constructor(message: string, retryAfter: number, decisions: readonly RateLimitDecision[] = []) {
    const body = (new.target as typeof RateLimitOverloadedException).responseBody(message, retryAfter, decisions);
    // Like a 429, an expected answer under load: no stack trace to capture.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      super(body, HttpStatus.SERVICE_UNAVAILABLE);
    } finally {
      Error.stackTraceLimit = stackTraceLimit;
    }
    this.retryAfter = retryAfter;
    this.decisions = decisions;
  }

  /** What `getResponse()` returns (the JSON body of the 503); a subclass may answer with another. */
  protected static responseBody(message: string, retryAfter: number, _decisions: readonly RateLimitDecision[]): object {
    const body: RateLimitOverloadedBody = { statusCode: HttpStatus.SERVICE_UNAVAILABLE, message, error: 'Service Unavailable', retryAfter };
    return body;
  }
}

/** `extensions` of the GraphQL error of a field refused because this instance is short of capacity. */
export interface RateLimitGraphqlOverloadedErrorExtensions {
  /** Told apart from a rate limit's `'RATE_LIMITED'`: the server's capacity, not the client's quota, ran out. */
  code: 'SERVICE_UNAVAILABLE';
  /** Whole seconds after which a retry may find capacity. */
  retryAfter: number;
}

/**
 * Thrown by {@link RateLimitGuard} when an adaptive limit or the load shedder refuses a GraphQL resolver call:
 * a {@link RateLimitOverloadedException} (exception filters, `getStatus()` 503) whose `extensions` graphql-js
 * copies onto the field's error: `{ code: 'SERVICE_UNAVAILABLE', retryAfter }`. As with the 429's
 * {@link GraphqlRateLimitExceededException}, the other fields still resolve and the HTTP status stays 200.
 *
 * Its `getResponse()` body has no `statusCode`, so that `@nestjs/apollo` keeps the code rather than rewriting
 * it to `INTERNAL_SERVER_ERROR`.
 */
export class GraphqlRateLimitOverloadedException extends RateLimitOverloadedException {
  /** The GraphQL error's `extensions`. */
  readonly extensions: RateLimitGraphqlOverloadedErrorExtensions;

  constructor(message: string, retryAfter: number, decisions: readonly RateLimitDecision[] = []) {
    super(message, retryAfter, decisions);
    this.extensions = { code: 'SERVICE_UNAVAILABLE', retryAfter };
  }

  protected static override responseBody(message: string, retryAfter: number): object {
    return { message, error: 'Service Unavailable', retryAfter };
  }
}

/**
 * The problem type of draft-ietf-httpapi-ratelimit-headers for a request refused because the server's capacity
 * is temporarily reduced (its "Problem Types" section; recommended status 503).
 */
export const RATE_LIMIT_TEMPORARY_REDUCED_CAPACITY_TYPE = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';

/** The 503 body of an adaptive limit's refusal with `errorFormat: 'problem+json'` (RFC 9457). */
export interface RateLimitOverloadedProblemDetails {
  type: typeof RATE_LIMIT_TEMPORARY_REDUCED_CAPACITY_TYPE;
  /** The title the draft registers for the type. */
  title: 'Temporary Reduced Capacity';
  status: 503;
  detail: string;
  /** Names of the adaptive policies that refused the request. */
  'violated-policies': string[];
}

/**
 * The {@link RateLimitOverloadedException} of `errorFormat: 'problem+json'`: its `getResponse()` is
 * {@link RateLimitOverloadedProblemDetails}, sent as `application/problem+json`.
 */
export class RateLimitOverloadedProblemException extends RateLimitOverloadedException {
  protected static override responseBody(message: string, _retryAfter: number, decisions: readonly RateLimitDecision[]): object {
    const body: RateLimitOverloadedProblemDetails = {
      type: RATE_LIMIT_TEMPORARY_REDUCED_CAPACITY_TYPE,
      title: 'Temporary Reduced Capacity',
      status: HttpStatus.SERVICE_UNAVAILABLE,
      detail: message,
      'violated-policies': decisions.filter((d) => !d.allowed).map((d) => d.policy),
    };
    return body;
  }
}
