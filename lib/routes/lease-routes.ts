import { Injectable } from '@nestjs/common';
import { INTERCEPTORS_METADATA, PATH_METADATA } from '@nestjs/common/constants';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { HANDLER_SETTLED } from '../http/handler-settlement';
import { RateLimitPolicies, type RateLimitMetadata } from '../rate-limit.decorator';
import { RateLimitRouteRegistry } from './route-registry';

// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
type Handler = Function;
type ControllerClass = abstract new (...args: never[]) => unknown;

/**
 * Adds {@link HANDLER_SETTLED} to the interceptors of every HTTP route that holds `concurrency` leases, so
 * their leases last until the handler has settled (see `HandlerSettlement`). Runs while the app's providers
 * are created, before Nest builds its routes (which read each handler's interceptors once); every other route
 * keeps a chain without it. Plans are made here in the order the registry makes them at init, so scope names
 * are the same; a policy that does not compile is left for the registry to report.
 */
@Injectable()
export class RateLimitLeaseRoutes {
  constructor(discovery: DiscoveryService, scanner: MetadataScanner, reflector: Reflector, routes: RateLimitRouteRegistry) {
    for (const { metatype } of discovery.getControllers()) {
      const prototype = (metatype as ControllerClass | undefined)?.prototype as Record<string, unknown> | undefined;
      if (typeof metatype !== 'function' || !prototype) continue;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const handler = prototype[name];
        if (typeof handler !== 'function') continue;
        // The handlers the registry plans, all of them (the first plan of a controller names its scope).
        const path = Reflect.hasMetadata(PATH_METADATA, handler);
        if (!path && reflector.get<RateLimitMetadata | undefined>(RateLimitPolicies.KEY, handler) === undefined) continue;
        const leases = holdsLeases(routes, metatype as ControllerClass, handler);
        if (path && leases) addInterceptor(handler);
      }
    }
  }
}

function holdsLeases(routes: RateLimitRouteRegistry, controller: ControllerClass, handler: Handler): boolean {
  try {
    return routes.plan(controller, handler)?.holdsLeases === true;
  } catch {
    return false; // RateLimitRouteRegistry throws it at init, naming the route and the field.
  }
}

function addInterceptor(handler: Handler): void {
  const interceptors = (Reflect.getMetadata(INTERCEPTORS_METADATA, handler) as unknown[] | undefined) ?? [];
  if (!interceptors.includes(HANDLER_SETTLED)) Reflect.defineMetadata(INTERCEPTORS_METADATA, [...interceptors, HANDLER_SETTLED], handler);
}
