import { Controller, Get, type ExecutionContext } from '@nestjs/common';
import { RateLimit, SkipRateLimit } from '../lib';

/** Demo API keys and their plans; a real app would look them up in a database (and cache them). */
const PLANS: Record<string, { plan: string; perMinute: number }> = {
  'demo-free': { plan: 'free', perMinute: 10 },
  'demo-pro': { plan: 'pro', perMinute: 100 },
};
/** Anonymous callers (no or unknown key), counted per IP. */
const ANONYMOUS_PER_MINUTE = 3;

function apiKey(context: ExecutionContext): string | undefined {
  const key = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-api-key'];
  return key && PLANS[key] ? key : undefined;
}

@Controller()
export class ApiController {
  /** Limited by the module's defaultPolicy (gcra, 60 per minute). */
  @Get()
  index() {
    return {
      routes: [
        '/health',
        '/quotes',
        '/search',
        '/feed',
        '/algorithms/<name>',
        'POST /login',
        'POST /moderation/deny',
        '/tenants/data, PUT /tenants/plans/<tenant>',
        'POST /ai/complete',
        '/reports',
        '/catalog/items, /catalog/search, /catalog/export',
        '/export',
        '/outbound/quotes?n=10',
        'POST /graphql',
        'socket.io: chat',
        '/metrics',
      ],
    };
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return { status: 'ok' };
  }

  /** Plan tiers: the quota follows the `x-api-key` header (free 10/min, pro 100/min, anonymous 3/min per IP). */
  @Get('quotes')
  @RateLimit({
    name: 'plan',
    algorithm: 'sliding-window',
    window: '1m',
    by: (context) => (apiKey(context) ? `key:${apiKey(context)}` : undefined),
    limit: (context) => PLANS[apiKey(context) ?? '']?.perMinute ?? ANONYMOUS_PER_MINUTE,
  })
  quotes() {
    return { quote: 'Premature optimisation is the root of all evil.' };
  }

  /** Rolling out a stricter limit: 'next' (5/min) runs in shadow mode, only reported, while 'current' (30/min) enforces. */
  @Get('search')
  @RateLimit([
    { name: 'current', algorithm: 'sliding-window', limit: 30, window: '1m' },
    { name: 'next', algorithm: 'sliding-window', limit: 5, window: '1m', mode: 'shadow' },
  ])
  search() {
    return { results: [] };
  }

  /**
   * One limit for everyone (2,000 per second for the whole API) beside each client's own: with Redis, each
   * instance takes the global key's units 20 at a time and spends them in-process (`slice`), so the hot key
   * costs Redis one call per 20 requests instead of one per request.
   */
  @Get('feed')
  @RateLimit([
    { name: 'everyone', algorithm: 'token-bucket', limit: 2_000, window: '1s', by: () => 'whole-api', slice: 20 },
    { name: 'client', algorithm: 'gcra', limit: 20, window: '1m' },
  ])
  feed() {
    return { items: [] };
  }
}
