import { Logger } from '@nestjs/common';
import type { TrackerSource } from '../http/tracker';
import type { RoutePlan, TrackerGroup } from './route-plan';

/**
 * Says, once per route, that a `by: 'user'` policy met a call without a user and limited it per IP address:
 * anonymous calls count per IP by design, but on a route that requires authentication it means the auth guard
 * ran after the rate-limit guard (the usual case: `RateLimitModule` registers its guard as an `APP_GUARD`, and
 * global guards run before controller-level ones), so every user shares their IP's quota. One entry per route
 * that ever had such a call, so memory is bounded by the app's routes, not by its clients.
 */
export class UserFallbackWarnings {
  private readonly logger = new Logger('RateLimit');
  private readonly warned = new Set<string>();

  /** Notes that a call on `plan` had no user for `group` (a `by: 'user'` group); warns the first time per route. */
  anonymous(plan: RoutePlan, group: TrackerGroup, source: TrackerSource): void {
    // A microservice message has no user: `by: 'user'` means its default tracker there, nothing to warn about.
    const where = source.userSource;
    if (where === undefined || this.warned.has(plan.route)) return;
    this.warned.add(plan.route);
    const names = group.indexes.map((i) => `'${plan.policies[i].compiled.name}'`).join(', ');
    this.logger.warn(
      `by: 'user' on ${plan.route} (policy ${names}): a call came with no ${where} (or one without user.id or user.sub), ` +
        `so it was limited per IP address instead, as anonymous calls on this route will be. If the route requires ` +
        `authentication, your auth guard ran after the rate-limit guard, which RateLimitModule registers as an APP_GUARD ` +
        `(global guards run before controller guards): register the auth guard as an APP_GUARD too, in the module the app ` +
        `boots (your AppModule) or in a module imported before RateLimitModule (Nest runs global guards in the order it ` +
        `finds their modules, starting with the one it boots), or set registerGuard: false and ` +
        `list the rate-limit guard after it, @UseGuards(AuthGuard, RateLimitGuard); or give the policy a by function ` +
        `that finds the user itself. Logged once per route.`,
    );
  }
}
