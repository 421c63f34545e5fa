import { Body, Controller, Delete, Get, Headers, HttpCode, Param, Put, type ExecutionContext } from '@nestjs/common';
import { RateLimit, RateLimitAdmin, SkipRateLimit, type RateLimitOverride, type RateLimitPolicy } from '../lib';
import { assertAdmin, badRequestOnConfig } from './moderation.controller';

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

  /** Sets the tenant's plan: `perMinute` instead of 5, for `minutes` or until removed. */
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
    await badRequestOnConfig(this.admin.setOverride('tenant-api', tenant, override, until));
  }

  /** Back to the plan everyone has. */
  @Delete('plans/:tenant')
  @SkipRateLimit()
  @HttpCode(204)
  async removePlan(@Headers('x-admin-token') token: string | undefined, @Param('tenant') tenant: string): Promise<void> {
    assertAdmin(token);
    await badRequestOnConfig(this.admin.removeOverride('tenant-api', tenant));
  }

  /** Every tenant's plan in force: `[{ policy, tracker, override, until? }]`. */
  @Get('plans')
  @SkipRateLimit()
  async plans(@Headers('x-admin-token') token: string | undefined) {
    assertAdmin(token);
    return this.admin.listOverrides('tenant-api');
  }
}
