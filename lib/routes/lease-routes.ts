import { Injectable } from '@nestjs/common';
import { INTERCEPTORS_METADATA } from '@nestjs/common/constants';
import { HANDLER_SETTLED } from '../http/handler-settlement';
import { RateLimitRouteRegistry } from './route-registry';

/**
 * Adds {@link HANDLER_SETTLED} to the interceptors of every HTTP route that holds `concurrency` leases, so
 * their leases last until the handler has settled (see `HandlerSettlement`), or has a `settle` policy, which
 * is given what the handler returned. Runs while the app's providers are created, before Nest builds its
 * routes (which read each handler's interceptors once); every other route keeps a chain without it.
 */
@Injectable()
export class RateLimitLeaseRoutes {
  constructor(routes: RateLimitRouteRegistry) {
    for (const handler of routes.httpRoutesAwaitingHandlers()) {
      const interceptors = (Reflect.getMetadata(INTERCEPTORS_METADATA, handler) as unknown[] | undefined) ?? [];
      if (!interceptors.includes(HANDLER_SETTLED))
        Reflect.defineMetadata(INTERCEPTORS_METADATA, [...interceptors, HANDLER_SETTLED], handler);
    }
  }
}
