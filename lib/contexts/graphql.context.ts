import type { ExecutionContext } from '@nestjs/common';
import { HttpExchange, requestIp, type HttpRequestLike, type HttpResponseLike } from '../http/http-exchange';
import type { IpTrackers } from '../http/tracker';
import { RateLimitStoreUnavailableException } from '../rate-limit.exception';
import { httpRejection } from './http.context';
import { claimContext, type RateLimitCallOutcome, type RateLimitContextAdapter, type RateLimitRejection } from './rate-limit-context';

/** graphql-ws's connection context, which holds the HTTP upgrade request of the subscription's socket. */
interface GraphqlWsContextLike {
  extra?: { request?: HttpRequestLike };
}

/**
 * The GraphQL context object (the third resolver argument, what `GqlExecutionContext#getContext()`
 * returns), as the drivers fill it: Apollo on Express `{ req }` (Express sets `req.res`), Apollo on
 * Fastify `{ req }` plus whatever the app's `context` function adds (`reply`), Mercurius `{ reply }`
 * (`reply.request`), graphql-ws subscriptions `{ req: { extra: { request } } }` through Nest's Apollo
 * driver, `{ extra: { request } }` otherwise.
 */
interface GraphqlContextLike extends GraphqlWsContextLike {
  req?: (HttpRequestLike & { res?: HttpResponseLike }) | GraphqlWsContextLike;
  request?: HttpRequestLike;
  res?: HttpResponseLike;
  reply?: HttpResponseLike & { request?: HttpRequestLike };
}

/** The parts of `GraphQLResolveInfo` read here (the fourth resolver argument). */
interface GraphqlInfoLike {
  operation?: { operation?: string };
}

/**
 * A resolver call (`context.getType() === 'graphql'`), read by duck typing: `@nestjs/graphql` is never
 * loaded. Each resolver call is decided on its own (two limited fields in one query count once each).
 * Default tracker: `ip:<address>` of the HTTP request the operation came in on. Headers go on that HTTP
 * response (the last limited field of a query writes them). Rejected with the same 429
 * `RateLimitExceededException` as HTTP, which the GraphQL driver turns into an error in `errors`.
 */
export class GraphqlRateLimitContext implements RateLimitContextAdapter {
  private readonly request: HttpRequestLike | undefined;
  private readonly exchange: HttpExchange | undefined;

  constructor(private readonly context: ExecutionContext) {
    const gql = context.getArgByIndex<GraphqlContextLike | undefined>(2) ?? {};
    const req = isRequest(gql.req) ? gql.req : undefined;
    const wsRequest = gql.extra?.request ?? (gql.req as GraphqlWsContextLike | undefined)?.extra?.request;
    this.request = [req, gql.request, gql.reply?.request, wsRequest].find(isRequest);
    const response = gql.res ?? gql.reply ?? req?.res;
    this.exchange = this.request && response ? new HttpExchange(this.request, response) : undefined;
  }

  /** Whether the call resolves a field of a subscription operation. */
  static isSubscription(context: ExecutionContext): boolean {
    return context.getArgByIndex<GraphqlInfoLike | undefined>(3)?.operation?.operation === 'subscription';
  }

  claim(): boolean {
    return claimContext(this.context);
  }

  defaultTracker(ips: IpTrackers): string {
    return ips.of(this.request && requestIp(this.request));
  }

  get user(): unknown {
    return this.request?.user;
  }

  setHeader(name: string, value: string): void {
    this.exchange?.setHeader(name, value);
  }

  onEnd(listener: (outcome: RateLimitCallOutcome) => void): void {
    this.exchange?.onEnd(listener);
  }

  rejected(rejection: RateLimitRejection): Error {
    return httpRejection(this.exchange, rejection);
  }

  unavailable(): Error {
    return new RateLimitStoreUnavailableException();
  }
}

/** An HTTP request (Express, Fastify or Node's own), not some other object a driver put in its place. */
function isRequest<T extends HttpRequestLike>(value: T | object | undefined): value is T {
  return typeof value === 'object' && value !== null && typeof (value as { headers?: unknown }).headers === 'object';
}
