import type { ExecutionContext } from '@nestjs/common';
import type { RateLimitHeaderProfile } from '../http/header-profiles';
import { RATE_LIMIT_CONTEXT_TYPES, type RateLimitContextType, type RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { GraphqlRateLimitContext } from './graphql.context';
import { HttpRateLimitContext } from './http.context';
import type { RateLimitContextAdapter } from './rate-limit-context';
import { RpcRateLimitContext } from './rpc.context';
import { WsRateLimitContext } from './ws.context';

const ADAPTERS: Record<RateLimitContextType, new (context: ExecutionContext, profile: RateLimitHeaderProfile) => RateLimitContextAdapter> =
  {
    http: HttpRateLimitContext,
    graphql: GraphqlRateLimitContext,
    ws: WsRateLimitContext,
    rpc: RpcRateLimitContext,
  };

/** Which calls the guard limits (module options `contexts`, `limitSubscriptions`), and their adapters. */
export class RateLimitContexts {
  private readonly types: ReadonlySet<string>;
  private readonly http: boolean;
  private readonly limitSubscriptions: boolean;

  /**
   * @param profile how the `RateLimit` field reads, for adapters that render it themselves (a GraphQL
   * operation's headers merge every field's)
   */
  constructor(
    { contexts, limitSubscriptions }: Pick<RateLimitModuleOptions, 'contexts' | 'limitSubscriptions'>,
    private readonly profile: RateLimitHeaderProfile,
  ) {
    this.types = new Set(contexts ?? RATE_LIMIT_CONTEXT_TYPES);
    this.http = this.types.has('http');
    this.limitSubscriptions = limitSubscriptions ?? false;
  }

  /**
   * The kind of `context` when the guard limits it; `null` for kinds left out of `contexts`, unknown kinds
   * (custom transports) and, unless `limitSubscriptions`, GraphQL subscriptions.
   */
  limited(context: ExecutionContext): RateLimitContextType | null {
    const type = context.getType<string>();
    if (type === 'http') return this.http ? type : null; // the usual call, answered without a set lookup
    if (!this.types.has(type)) return null;
    if (type === 'graphql' && !this.limitSubscriptions && GraphqlRateLimitContext.isSubscription(context)) return null;
    return type as RateLimitContextType;
  }

  /** The adapter for a call of a kind {@link limited} accepted. */
  adapt(type: RateLimitContextType, context: ExecutionContext): RateLimitContextAdapter {
    // `new` of a class picked at run time goes through V8's generic construct; HTTP's is named, so inlined.
    return type === 'http' ? new HttpRateLimitContext(context) : new ADAPTERS[type](context, this.profile);
  }
}
