import { Controller, Get, type ExecutionContext } from '@nestjs/common';
import { RateLimit } from '../lib';

/** The caller's API key (`x-api-key`), or undefined: then the monthly quota is counted per IP. */
function apiKey(context: ExecutionContext): string | undefined {
  const key = context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-api-key'];
  return key ? `key:${key}` : undefined;
}

@Controller('reports')
export class ReportsController {
  /**
   * Calendar quotas: 1000 reports per day in Paris, starting over at midnight Paris time (a day of 23 or 25
   * hours across a DST change), and 50,000 per API key per month, starting over on the 1st at 00:00 UTC.
   * `RateLimit: "daily";r=999;t=<seconds to midnight in Paris>, "monthly";r=49999;t=<seconds to the 1st>`.
   * @example curl -i -H 'x-api-key: demo-pro' localhost:3000/reports
   */
  @Get()
  @RateLimit([
    { name: 'daily', algorithm: 'fixed-window', limit: 1000, window: { calendar: 'day', timeZone: 'Europe/Paris' } },
    { name: 'monthly', algorithm: 'fixed-window', limit: 50_000, window: { calendar: 'month' }, by: apiKey },
  ])
  list() {
    return { reports: [{ id: 1, title: 'Daily sales' }] };
  }
}
