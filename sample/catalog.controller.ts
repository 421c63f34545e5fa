import { Controller, Get, type ExecutionContext } from '@nestjs/common';
import { RateLimit, SkipRateLimit } from '../lib';

/** Internal callers (a header only the platform's own jobs send) are exempt from the burst policy. */
const internal = (ctx: ExecutionContext) =>
  ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-internal'] === 'demo';

/**
 * Named policies, changed per route the way @nestjs/throttler users change theirs: an override
 * (`@RateLimit({ name, …only the fields to change })`) keeps the policy's other fields and the class's other
 * policies; `@SkipRateLimit('burst')` drops one policy; `skipIf` exempts some calls from one policy.
 */
@Controller('catalog')
@RateLimit([
  { name: 'burst', algorithm: 'token-bucket', limit: 5, window: '1s', skipIf: internal },
  { name: 'hourly', algorithm: 'sliding-window', limit: 100, window: '1h' },
])
export class CatalogController {
  /** 5 at once, refilled at 5 per second, and 100 per hour. */
  @Get('items')
  items() {
    return { items: ['lamp', 'desk', 'chair'] };
  }

  /** Search is heavier: the burst policy with a limit of 2 (still a token bucket over 1 s), and 100 per hour. */
  @Get('search')
  @RateLimit({ name: 'burst', limit: 2 })
  search() {
    return { results: [] };
  }

  /** Exports are paced by the hourly quota only. */
  @Get('export')
  @SkipRateLimit('burst')
  export() {
    return { url: '/exports/catalog.csv' };
  }
}
