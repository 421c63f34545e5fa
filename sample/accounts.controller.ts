import { Body, Controller, Get, HttpCode, Post, UnauthorizedException, type ExecutionContext } from '@nestjs/common';
import { RateLimit } from '../lib';

interface LoginBody {
  username?: string;
  password?: string;
}

/** Counts failed logins per account name, so spreading guesses over many IPs does not help. */
function account(context: ExecutionContext): string | undefined {
  const body = context.switchToHttp().getRequest<{ body?: LoginBody }>().body;
  return body?.username ? `account:${body.username}` : undefined;
}

@Controller()
export class AccountsController {
  /**
   * 5 failed logins per 15 minutes per account, then a 15-minute lockout; successful logins are free. A
   * repeat offender waits twice as long each time (30 min, 1 h … at most a day) until a quiet week has passed.
   * The demo password is `correct horse`.
   */
  @Post('login')
  @HttpCode(200)
  @RateLimit({
    algorithm: 'fixed-window',
    limit: 5,
    window: '15m',
    countOnly: 'failed',
    blockFor: '15m',
    escalate: { max: '1d', forgiveAfter: '7d' },
    by: account,
  })
  login(@Body() body: LoginBody) {
    if (body?.password !== 'correct horse') throw new UnauthorizedException('wrong username or password');
    return { welcome: body.username };
  }

  /** Heavy work: at most 2 exports run at once per client; a lease comes back when the response ends. */
  @Get('export')
  @RateLimit({ algorithm: 'concurrency', limit: 2, window: '1m' })
  async export() {
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    return { rows: 1_000 };
  }
}
