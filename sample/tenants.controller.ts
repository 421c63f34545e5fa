import {
  BadRequestException,
  Body,
  Controller,
  Delete,
  Get,
  Headers,
  HttpCode,
  Param,
  Put,
  ServiceUnavailableException,
  type ExecutionContext,
} from '@nestjs/common';
import {
  RateLimit,
  RateLimitAdmin,
  RateLimitConfigError,
  RateLimitStoreError,
  SkipRateLimit,
  type RateLimitOverride,
  type RateLimitPolicy,
} from '../lib';
import { assertAdmin } from './moderation.controller';

/** Every tenant's quota as deployed: 5 per minute, per `x-tenant` header (a real app reads it from its auth). */
const TENANT_API: RateLimitPolicy = {
  name: 'tenant-api',
  algorithm: 'fixed-window',
  limit: 5,
  window: '1m',
  by: (context: ExecutionContext) =>
    context.switchToHttp().getRequest<{ headers: Record<string, string | undefined> }>().headers['x-tenant'],
};

interface PlanBody {
  /** The tenant's new limit per minute. */
  perMinute?: number;
  /** When the plan ends (a trial, an incident's clamp), in minutes from now; absent: until removed. */
  minutes?: number;
}

/**
 * Plans changed at runtime, without a redeploy: a billing webhook or an admin screen sets a tenant's limit, and
 * every instance applies it within a second (runtime overrides, kept in the store). `GET /tenants/data` is the
 * tenant API; the plan routes are behind the demo admin token and never limited themselves.
 * @example curl -X PUT localhost:3000/tenants/plans/acme -H 'x-admin-token: demo-admin' -H 'content-type: application/json' -d '{"perMinute":50}'
 * @example curl localhost:3000/tenants/data -H 'x-tenant: acme' -i   # RateLimit-Policy: "tenant-api";q=50;w=60
 */
@Controller('tenants')
export class TenantsController {
  constructor(private readonly admin: RateLimitAdmin) {}

  @Get('data')
  @RateLimit(TENANT_API)
  data() {
    return { rows: [] };
  }

  /**
   * Sets the tenant's plan: `perMinute` instead of 5, for `minutes` or until removed. The library checks the
   * numbers: `{"perMinute":0}` or `{"perMinute":"lots"}` answers 400 with its message
   * (`setOverride: limit: "lots" must be a whole number ≥ 1.`); Redis unreachable answers 503 (see {@link adminError}).
   */
  @Put('plans/:tenant')
  @SkipRateLimit()
  @HttpCode(204)
  async setPlan(
    @Headers('x-admin-token') token: string | undefined,
    @Param('tenant') tenant: string,
    @Body() body: PlanBody,
  ): Promise<void> {
    assertAdmin(token);
    const override: RateLimitOverride = { limit: body?.perMinute };
    const until = body?.minutes === undefined ? undefined : { until: Date.now() + body.minutes * 60_000 };
    try {
      await this.admin.setOverride('tenant-api', tenant, override, until);
    } catch (error) {
      throw adminError(error);
    }
  }

  /** Back to the plan everyone has. */
  @Delete('plans/:tenant')
  @SkipRateLimit()
  @HttpCode(204)
  async removePlan(@Headers('x-admin-token') token: string | undefined, @Param('tenant') tenant: string): Promise<void> {
    assertAdmin(token);
    try {
      await this.admin.removeOverride('tenant-api', tenant);
    } catch (error) {
      throw adminError(error);
    }
  }

  /** Every tenant's plan in force: `[{ policy, tracker, override, until? }]`. */
  @Get('plans')
  @SkipRateLimit()
  async plans(@Headers('x-admin-token') token: string | undefined) {
    assertAdmin(token);
    return this.admin.listOverrides('tenant-api').catch((error: unknown) => {
      throw adminError(error);
    });
  }
}

/**
 * What a failed override call answers. A `RateLimitConfigError` is the caller's mistake (a limit of 0, "lots", a
 * policy name no route has): 400 with the library's message, which names the field and the value. A
 * `RateLimitStoreError` means the store did not answer (Redis stopped or unreachable): the change may or may not
 * have been made, so 503 with its message; call again, or read `GET /tenants/plans`, once Redis is back.
 * Anything else stays a 500.
 */
function adminError(error: unknown): unknown {
  if (error instanceof RateLimitConfigError) return new BadRequestException(error.message);
  if (error instanceof RateLimitStoreError) return new ServiceUnavailableException(error.message);
  return error;
}
