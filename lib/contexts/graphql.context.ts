import type { ExecutionContext } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { headerProfile, type RateLimitHeaderProfile } from '../http/header-profiles';
import { HttpExchange, requestIp, type HttpRequestLike, type HttpResponseLike } from '../http/http-exchange';
import { isViolated } from '../http/rate-limit-headers';
import type { IpTrackers } from '../http/tracker';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import {
  GraphqlRateLimitExceededException,
  GraphqlRateLimitOverloadedException,
  RateLimitStoreUnavailableException,
} from '../rate-limit.exception';
import {
  claimContext,
  type RateLimitCallOutcome,
  type RateLimitContextAdapter,
  type RateLimitOverload,
  type RateLimitRejection,
} from './rate-limit-context';

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
 * response, merged over every limited field of the operation (see {@link OperationLimits}). Rejected with a
 * {@link GraphqlRateLimitExceededException}: the field's error in `errors` has `extensions.code`
 * `'RATE_LIMITED'` and `extensions.retryAfter`, the other fields still resolve, and the HTTP status stays
 * 200 (GraphQL over HTTP: a field error is part of a result, not a failed request), even when the rejected
 * field was the operation's only one. Clients read the code, `retryAfter` or the `Retry-After` header. A call
 * refused because this instance is short of capacity (an adaptive limit, the load shedder) is answered the same
 * way with a {@link GraphqlRateLimitOverloadedException}, whose code is `'SERVICE_UNAVAILABLE'`.
 */
export class GraphqlRateLimitContext implements RateLimitContextAdapter {
  private readonly request: HttpRequestLike | undefined;
  private readonly exchange: HttpExchange | undefined;
  /** What this call writes to the response; joined to the operation's {@link OperationLimits} on first write. */
  private readonly field: FieldLimits = { headers: new Map(), rejected: new Set(), retryAfter: undefined };

  /**
   * @param profile how the `RateLimit` field reads: under one that lists only the violated policies on a
   * rejection, an operation with a rejected field lists only the policies that rejected some field
   */
  constructor(
    private readonly context: ExecutionContext,
    private readonly profile: RateLimitHeaderProfile = headerProfile(),
  ) {
    const gql = context.getArgByIndex<GraphqlContextLike | undefined>(2) ?? {};
    const req = isRequest(gql.req) ? gql.req : undefined;
    const wsRequest = gql.extra?.request ?? (gql.req as GraphqlWsContextLike | undefined)?.extra?.request;
    this.request = [req, gql.request, gql.reply?.request, wsRequest].find(isRequest);
    const response = gql.res ?? gql.reply ?? req?.res;
    this.exchange = this.request && response ? new HttpExchange(this.request, response) : undefined;
  }

  /** Over HTTP, the operation's response; a subscription's message over a WebSocket has no end signal. */
  get hearsEnd(): boolean {
    return this.exchange !== undefined;
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

  /** Where {@link user} is read from, for the warning about a `by: 'user'` call without one. */
  get userSource(): string {
    return 'req.user in the GraphQL context';
  }

  setHeader(name: string, value: string): void {
    if (this.exchange) operationLimits(this.exchange, this.profile).write(this.field, name, value);
  }

  onEnd(listener: (outcome: RateLimitCallOutcome) => void): void {
    this.exchange?.onEnd(listener);
  }

  rejected({ message, retryAfter, decisions }: RateLimitRejection): Error {
    this.report(retryAfter, decisions);
    return new GraphqlRateLimitExceededException(message, retryAfter, decisions);
  }

  overloaded({ message, retryAfter, decisions }: RateLimitOverload): Error {
    this.report(retryAfter, decisions);
    return new GraphqlRateLimitOverloadedException(message, retryAfter, decisions);
  }

  unavailable(): Error {
    return new RateLimitStoreUnavailableException();
  }

  /** Tells the operation's headers that this field was refused: its violated policies and its wait. */
  private report(retryAfter: number | null, decisions: readonly RateLimitDecision[]): void {
    if (!this.exchange) return;
    for (const d of decisions) if (isViolated(d)) this.field.rejected.add(d.policy);
    this.field.retryAfter = retryAfter;
    operationLimits(this.exchange, this.profile).update(this.field);
  }
}

/** Set on the Node response of a GraphQL operation: its {@link OperationLimits}. */
const OPERATION_LIMITS = Symbol('nestjs-redis-ratelimit:graphql-operation-limits');

/** What one limited resolver call reported: its header values as the guard set them, and its rejection. */
interface FieldLimits {
  /** Header name (as the guard spells it) → value. */
  headers: Map<string, string>;
  /** Names of the policies that rejected the call. */
  rejected: Set<string>;
  /** `Retry-After` seconds when rejected; `null` when never allowed. */
  retryAfter: number | null | undefined;
}

/** One list member of `RateLimit` / `RateLimit-Policy`, keyed by its policy name. */
interface Member {
  name: string;
  text: string;
}

/** The {@link OperationLimits} of the operation `exchange` answers, created by its first limited field. */
function operationLimits(exchange: HttpExchange, profile: RateLimitHeaderProfile): OperationLimits {
  const raw = exchange.raw as ServerResponse & { [OPERATION_LIMITS]?: OperationLimits };
  return (raw[OPERATION_LIMITS] ??= new OperationLimits(exchange, profile.violatedOnly));
}

/**
 * Every limited field of one GraphQL operation decides on its own, but all of them share one HTTP response,
 * so the headers describe them all: each time a field writes, the headers are rendered again from every
 * field so far. `RateLimit` and `RateLimit-Policy` hold one member per policy name; when fields report the
 * same name (aliases of a field, routes sharing a `scope`, or equal names on different fields) the most
 * restrictive report wins: a rejection, then the fewest units left, then the longest wait. The legacy
 * headers describe the most restrictive field the same way; `Retry-After` is the longest wait of the
 * rejected fields. With `violatedOnly` (the header profile's), once a field is rejected `RateLimit` lists
 * only the policies that rejected some field, so no `t` beside `Retry-After` outlasts it.
 */
class OperationLimits {
  private readonly fields: FieldLimits[] = [];

  constructor(
    private readonly exchange: HttpExchange,
    private readonly violatedOnly: boolean,
  ) {}

  /** Records a header the guard set for `field`, and renders the operation's headers again. */
  write(field: FieldLimits, name: string, value: string): void {
    // A value this cannot read as list members is never dropped: it goes out as the guard wrote it.
    if (!MERGED.has(name) || (LISTS.has(name) && members(value).length === 0)) return this.exchange.setHeader(name, value);
    field.headers.set(name, value);
    this.update(field);
  }

  /** Renders the headers again after `field` changed (wrote a header, or was rejected). */
  update(field: FieldLimits): void {
    if (!this.fields.includes(field)) this.fields.push(field);
    this.renderLists();
    this.renderLegacy();
    this.renderRetryAfter();
  }

  private renderLists(): void {
    const quotas = this.fields.map((f) => members(f.headers.get('RateLimit')));
    const policies = this.fields.map((f) => members(f.headers.get('RateLimit-Policy')));
    const names = new Set([...policies.flat(), ...quotas.flat()].map((m) => m.name));
    if (names.size === 0) return;
    const violated = this.violatedOnly ? new Set(this.fields.flatMap((f) => [...f.rejected])) : undefined;
    const quota: string[] = [];
    const policy: string[] = [];
    for (const name of names) {
      let winner = -1;
      for (let i = 0; i < this.fields.length; i++) {
        if (quotas[i].some((m) => m.name === name) && (winner < 0 || this.restricts(i, winner, name, quotas))) winner = i;
      }
      const quotaMember = winner >= 0 ? quotas[winner].find((m) => m.name === name) : undefined;
      const policyMember =
        (winner >= 0 ? policies[winner] : []).find((m) => m.name === name) ?? policies.flat().find((m) => m.name === name);
      if (quotaMember && (!violated?.size || violated.has(name))) quota.push(quotaMember.text);
      if (policyMember) policy.push(policyMember.text);
    }
    if (policy.length > 0) this.exchange.setHeader('RateLimit-Policy', policy.join(', '));
    if (quota.length > 0) this.exchange.setHeader('RateLimit', quota.join(', '));
  }

  /** Whether field `a`'s report of policy `name` is more restrictive than field `b`'s. */
  private restricts(a: number, b: number, name: string, quotas: Member[][]): boolean {
    const [fa, fb] = [this.fields[a], this.fields[b]];
    if (fa.rejected.has(name) !== fb.rejected.has(name)) return fa.rejected.has(name);
    const [ma, mb] = [quotas[a], quotas[b]].map((list) => list.find((m) => m.name === name) as Member);
    const [ra, rb] = [param(ma.text, 'r'), param(mb.text, 'r')];
    return ra !== rb ? ra < rb : param(ma.text, 't') > param(mb.text, 't');
  }

  private renderLegacy(): void {
    let worst: FieldLimits | undefined;
    for (const f of this.fields) {
      if (!f.headers.has('X-RateLimit-Remaining')) continue;
      if (!worst || legacyRestricts(f, worst)) worst = f;
    }
    if (!worst) return;
    for (const name of LEGACY) {
      const value = worst.headers.get(name);
      if (value !== undefined) this.exchange.setHeader(name, value);
    }
  }

  private renderRetryAfter(): void {
    let seconds = -1;
    for (const { retryAfter } of this.fields) if (typeof retryAfter === 'number' && retryAfter > seconds) seconds = retryAfter;
    if (seconds >= 0) this.exchange.setHeader('Retry-After', String(seconds));
  }
}

/** The legacy headers, in the order the guard writes them. */
const LEGACY = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'] as const;
/** The structured list headers, merged member by member. */
const LISTS: ReadonlySet<string> = new Set(['RateLimit', 'RateLimit-Policy']);
/** The headers rendered from every field of the operation; any other passes straight through. */
const MERGED: ReadonlySet<string> = new Set([...LISTS, ...LEGACY]);

/** Whether field `a`'s legacy headers are more restrictive than `b`'s: rejected, then fewer left, then later reset. */
function legacyRestricts(a: FieldLimits, b: FieldLimits): boolean {
  if (a.rejected.size > 0 !== b.rejected.size > 0) return a.rejected.size > 0;
  const [ra, rb] = [a, b].map((f) => Number(f.headers.get('X-RateLimit-Remaining')));
  if (ra !== rb) return ra < rb;
  return Number(a.headers.get('X-RateLimit-Reset') ?? 0) > Number(b.headers.get('X-RateLimit-Reset') ?? 0);
}

/**
 * The members of a `RateLimit` or `RateLimit-Policy` value the guard wrote (an RFC 9651 list of strings
 * with parameters), split at the commas outside quoted strings, each keyed by its leading string.
 */
function members(value: string | undefined): Member[] {
  if (value === undefined) return [];
  const list: Member[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i <= value.length; i++) {
    const c = value[i];
    if (c === '\\' && quoted) i++;
    else if (c === '"') quoted = !quoted;
    else if ((c === ',' || c === undefined) && !quoted) {
      const text = value.slice(start, i).trim();
      const name = /^"((?:[^"\\]|\\.)*)"/.exec(text)?.[1];
      if (name !== undefined) list.push({ name, text });
      start = i + 1;
    }
  }
  return list;
}

const PARAMS = { r: /;\s*r=(-?\d+)(?=;|$)/, t: /;\s*t=(-?\d+)(?=;|$)/ };

/** An integer parameter (`r`, `t`) of a `RateLimit` member; `NaN` when absent. */
function param(member: string, key: keyof typeof PARAMS): number {
  const match = PARAMS[key].exec(member);
  return match ? Number(match[1]) : NaN;
}

/** An HTTP request (Express, Fastify or Node's own), not some other object a driver put in its place. */
function isRequest<T extends HttpRequestLike>(value: T | object | undefined): value is T {
  return typeof value === 'object' && value !== null && typeof (value as { headers?: unknown }).headers === 'object';
}
