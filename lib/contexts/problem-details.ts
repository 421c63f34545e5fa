import type { RateLimitRejection } from './rate-limit-context';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import {
  PROBLEM_JSON_CONTENT_TYPE,
  RateLimitExceededProblemException,
  RateLimitOverloadedProblemException,
  RateLimitStoreUnavailableProblemException,
} from '../rate-limit.exception';
import type { HttpExchange } from '../http/http-exchange';

/**
 * The 429 of a controller call as RFC 9457 problem details (`errorFormat: 'problem+json'`), after setting
 * `Retry-After` (when the wait is finite) and the problem's `Content-Type` on the response. The type is set
 * here, before Nest's exception filter replies: Express's `res.json` and Fastify's `send` keep a JSON type
 * already set (adding `; charset=utf-8`), and Nest's adapters leave any `+json` type alone.
 */
export function problemRejection(exchange: HttpExchange, { message, retryAfter, decisions }: RateLimitRejection): Error {
  if (retryAfter !== null) exchange.setHeader('Retry-After', String(retryAfter));
  exchange.setHeader('Content-Type', PROBLEM_JSON_CONTENT_TYPE);
  return new RateLimitExceededProblemException(message, retryAfter, decisions);
}

/** The 503 of a controller call whose `fail-closed` policy met a failed store, as problem details. */
export function problemUnavailable(exchange: HttpExchange): Error {
  exchange.setHeader('Content-Type', PROBLEM_JSON_CONTENT_TYPE);
  return new RateLimitStoreUnavailableProblemException();
}

/** The 503 of a controller call refused by an adaptive limit, as problem details of type `temporary-reduced-capacity`. */
export function problemOverloaded(
  exchange: HttpExchange,
  message: string,
  retryAfter: number,
  decisions: readonly RateLimitDecision[],
): Error {
  exchange.setHeader('Retry-After', String(retryAfter));
  exchange.setHeader('Content-Type', PROBLEM_JSON_CONTENT_TYPE);
  return new RateLimitOverloadedProblemException(message, retryAfter, decisions);
}
