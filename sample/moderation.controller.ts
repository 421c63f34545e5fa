import { BadRequestException, Body, Controller, Delete, ForbiddenException, Get, Headers, HttpCode, Param, Post } from '@nestjs/common';
import { RateLimitAdmin, RateLimitConfigError, SkipRateLimit } from '../lib';

/** Demo only: a real app puts these routes behind its own authentication. */
const ADMIN_TOKEN = 'demo-admin';

interface DenyBody {
  /** A tracker: `ip:203.0.113.7`, or a value a `by` function returns (`account:ann`, an API key…; `by:…` names it explicitly). */
  tracker?: string;
  minutes?: number;
  reason?: string;
}

/**
 * The shared deny list: deny a tracker on every route and every policy of every instance until a time, look
 * it up, lift it. Never limited itself, so an operator whose own address is denied can still lift it.
 * @example curl -X POST localhost:3000/moderation/deny -H 'x-admin-token: demo-admin' -H 'content-type: application/json' -d '{"tracker":"ip:127.0.0.1","minutes":1,"reason":"demo"}'
 */
@Controller('moderation/deny')
@SkipRateLimit()
export class ModerationController {
  constructor(private readonly admin: RateLimitAdmin) {}

  @Post()
  @HttpCode(204)
  async deny(@Headers('x-admin-token') token: string | undefined, @Body() body: DenyBody): Promise<void> {
    assertAdmin(token);
    await badRequestOnConfig(this.admin.deny(body?.tracker ?? '', (body?.minutes ?? 60) * 60_000, body?.reason));
  }

  /** `{ until, reason }` while the tracker is denied, `{ denied: false }` otherwise. */
  @Get(':tracker')
  async denied(@Headers('x-admin-token') token: string | undefined, @Param('tracker') tracker: string) {
    assertAdmin(token);
    return (await this.admin.denied(tracker)) ?? { denied: false };
  }

  @Delete(':tracker')
  @HttpCode(204)
  async allow(@Headers('x-admin-token') token: string | undefined, @Param('tracker') tracker: string): Promise<void> {
    assertAdmin(token);
    await this.admin.allow(tracker);
  }
}

/** The demo's admin check (shared with TenantsController). */
export function assertAdmin(token: string | undefined): void {
  if (token !== ADMIN_TOKEN) throw new ForbiddenException('x-admin-token required');
}

/** A deny the library refuses (a bad duration or reason) is the caller's mistake: 400, with the library's message. */
export async function badRequestOnConfig(work: Promise<void>): Promise<void> {
  try {
    await work;
  } catch (error) {
    throw error instanceof RateLimitConfigError ? new BadRequestException(error.message) : error;
  }
}
