import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { StringMemo } from '../shared/string-memo';
import { HandlerSettlement } from './handler-settlement';

/** Set on a request once a rate-limit guard has decided it. */
const CLAIMED = Symbol('nestjs-redis-ratelimit:claimed');

/**
 * Header names as Fastify stores them. Fastify lowercases every name it is given; a name that already is
 * lowercase comes back as the very same (internalized) string, where a lowercased copy is a new string that
 * the reply's header object must hash and look up on every request (~1,000 instructions per header).
 */
const FASTIFY_NAMES = new StringMemo((name) => name.toLowerCase(), 100);

/**
 * The parts of a request the guard reads, common to Express (`req`) and Fastify (`request`). `ip` is what
 * the framework computed, which honours the app's own trust-proxy setting and nothing else.
 */
export interface HttpRequestLike {
  ip?: string;
  headers: IncomingHttpHeaders;
  user?: unknown;
  socket?: { remoteAddress?: string };
}

/** Express `res` (a Node `ServerResponse`) or Fastify `reply` (wrapping one as `raw`). */
export type HttpResponseLike = ServerResponse | { raw: ServerResponse; header(name: string, value: string): unknown };

/**
 * The request and response of one HTTP call, read and written without knowing the adapter: a controller's
 * (`context.switchToHttp()`) or the one a GraphQL operation arrived on.
 */
export class HttpExchange {
  constructor(
    readonly request: HttpRequestLike,
    readonly response: HttpResponseLike,
  ) {}

  /**
   * Marks the request as rate limited; false when it already was, so a route that has both the global guard
   * and `@UseGuards(RateLimitGuard)` is still counted once.
   */
  claim(): boolean {
    const request = this.request as HttpRequestLike & { [CLAIMED]?: true };
    if (request[CLAIMED]) return false;
    request[CLAIMED] = true;
    return true;
  }

  /** The Node response underneath: Express `res` itself, Fastify `reply.raw`. */
  get raw(): ServerResponse {
    return 'raw' in this.response ? this.response.raw : this.response;
  }

  /** The client address as the framework sees it (`req.ip`), or the socket peer when it has none. */
  get ip(): string | undefined {
    return requestIp(this.request);
  }

  /**
   * Sets a response header through the adapter (so Fastify serialises it with the reply). Fastify sends
   * every name lowercase whatever it is given; Express and Node send `name` as it is.
   */
  setHeader(name: string, value: string): void {
    if ('raw' in this.response) this.response.header(FASTIFY_NAMES.get(name), value);
    else this.response.setHeader(name, value);
  }

  /**
   * Calls `listener` once when the response is over, however it ends: sent, an error response, or the
   * client going away (`aborted` true when the response never finished). With `untilHandlerSettles`, not
   * before the handler has settled either (see {@link HandlerSettlement}): a client going away does not stop
   * the handler, and a `concurrency` lease must last as long as its work.
   */
  onEnd(listener: (outcome: { statusCode: number; aborted: boolean }) => void, untilHandlerSettles = false): void {
    const raw = this.raw;
    const report = () => listener({ statusCode: raw.statusCode, aborted: !raw.writableFinished });
    const ended = untilHandlerSettles ? HandlerSettlement.attach(this.request, report) : report;
    // The client may have gone while the guard was deciding: 'close' has then already been emitted.
    if (raw.closed) process.nextTick(ended);
    else raw.once('close', ended);
  }
}

/** The client address of `request` as the framework sees it (`req.ip`), or the socket peer when it has none. */
export function requestIp(request: HttpRequestLike): string | undefined {
  return request.ip ?? request.socket?.remoteAddress;
}
