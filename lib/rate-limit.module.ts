import { Inject, Logger, Module, type CanActivate, type DynamicModule, type OnApplicationShutdown } from '@nestjs/common';
import { APP_GUARD, DiscoveryModule } from '@nestjs/core';
import { ALGORITHM_CLASSES, type RateLimitAlgorithm } from './algorithms';
import { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
import { RateLimitEvents } from './events/rate-limit-events';
import { RateLimitAdaptiveLimits } from './overload/adaptive-limits';
import { RateLimitLoadShedding } from './overload/rate-limit-load-shedding';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import { RateLimitHolds } from './http/request-holds';
import { RateLimitEngine } from './pipeline/rate-limit.engine';
import { RateLimitGuard } from './rate-limit.guard';
import {
  RATE_LIMIT_OPTIONS,
  RATE_LIMIT_STORE,
  RateLimitConfigurableModule,
  type RateLimitModuleExtras,
} from './rate-limit.module-definition';
import { RateLimitAdmin } from './rate-limit-admin.service';
import { RateLimitOutbound } from './rate-limit-outbound.service';
import { RateLimiterService } from './rate-limiter.service';
import { ServiceCalls } from './service/service-calls';
import { RateLimitLeaseRoutes } from './routes/lease-routes';
import { RateLimitRouteRegistry } from './routes/route-registry';
import { createStore } from './pipeline/create-store';
import { describeStore } from './stores/store-description';
import type { RateLimitStore } from './stores/store.interface';
import { validateModuleOptions } from './policy/validate-options';

/** Longest the module waits at startup for a Redis connection before starting anyway (less when it is refused or denied). */
const STARTUP_CONNECT_MS = 5_000;

/** Stands in for the global guard when `registerGuard: false`. */
const ALLOW_ALL: CanActivate = { canActivate: () => true };

/**
 * Rate limiting for Nest. `forRoot(options)` or `forRootAsync({ useFactory, inject })`; global by default.
 * @example RateLimitModule.forRoot({ redis: 'redis://localhost:6379' })
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    // One injectable strategy per algorithm, looked up by name through the registry.
    ...ALGORITHM_CLASSES,
    {
      provide: RateLimitAlgorithmRegistry,
      inject: [...ALGORITHM_CLASSES],
      useFactory: (...algorithms: RateLimitAlgorithm[]) => new RateLimitAlgorithmRegistry(algorithms),
    },
    // The options' hooks are called by the bus, which the store and the engine publish to.
    {
      provide: RateLimitEvents,
      inject: [RATE_LIMIT_OPTIONS],
      useFactory: (options: RateLimitModuleOptions) => new RateLimitEvents(options.hooks),
    },
    {
      provide: RATE_LIMIT_STORE,
      inject: [RATE_LIMIT_OPTIONS, RateLimitAlgorithmRegistry, RateLimitEvents],
      useFactory: async (options: RateLimitModuleOptions, registry: RateLimitAlgorithmRegistry, events: RateLimitEvents) => {
        validateModuleOptions(options);
        new Logger('RateLimit').log(describeStore(options.redis));
        return createStore({ ...options, hooks: events.hooks }, registry);
      },
    },
    {
      provide: RateLimitEngine,
      inject: [RATE_LIMIT_STORE, RATE_LIMIT_OPTIONS, RateLimitEvents],
      useFactory: async (store: RateLimitStore, options: RateLimitModuleOptions, events: RateLimitEvents) => {
        // Decide with Redis from the first request: wait for the connection, but never block startup long.
        // A store that is not ready warns by itself, naming the address and the cause.
        const connected = (await store.ready?.(STARTUP_CONNECT_MS)) ?? true;
        const engine = new RateLimitEngine(store, { ...options, hooks: events.hooks });
        // Runtime overrides set before this instance started apply from its first request (when the store is
        // there to ask: one that is not connected is not waited for twice); then it polls.
        await engine.overrides.start(connected);
        return engine;
      },
    },
    // One ServiceCalls for the three programmatic injectables: a policy compiles once, shutdown closes all three.
    {
      provide: ServiceCalls,
      inject: [RateLimitEngine, RateLimitAlgorithmRegistry, RATE_LIMIT_OPTIONS],
      useFactory: (engine: RateLimitEngine, registry: RateLimitAlgorithmRegistry, options: RateLimitModuleOptions) =>
        new ServiceCalls(engine, registry, options),
    },
    // Every adaptive limit, for the metrics' gauges; their admissions are told on the module's bus.
    {
      provide: RateLimitAdaptiveLimits,
      inject: [RateLimitEvents, RATE_LIMIT_OPTIONS],
      useFactory: (events: RateLimitEvents, options: RateLimitModuleOptions) =>
        new RateLimitAdaptiveLimits(events.hooks, options.nearLimitRatio),
    },
    RateLimitAdmin,
    RateLimitOutbound,
    RateLimiterService,
    RateLimitRouteRegistry,
    // Before Nest builds its routes: lease routes get the interceptor that sees their handler settle.
    RateLimitLeaseRoutes,
    RateLimitHolds,
    // Option `loadShedding`: samples the process on a timer from bootstrap to shutdown (nothing without it).
    RateLimitLoadShedding,
    RateLimitGuard,
    {
      // A factory, so `registerGuard: false` is honoured for forRootAsync too, where options come late.
      provide: APP_GUARD,
      inject: [RATE_LIMIT_OPTIONS, RateLimitGuard],
      useFactory: (options: RateLimitModuleOptions, guard: RateLimitGuard): CanActivate =>
        options.registerGuard === false ? ALLOW_ALL : guard,
    },
  ],
  exports: [
    RateLimiterService,
    RateLimitAdmin,
    RateLimitOutbound,
    RateLimitEngine,
    RateLimitEvents,
    RATE_LIMIT_STORE,
    RATE_LIMIT_OPTIONS,
    RateLimitAlgorithmRegistry,
    RateLimitRouteRegistry,
    RateLimitHolds,
    RateLimitLoadShedding,
    RateLimitAdaptiveLimits,
    RateLimitGuard,
  ],
})
export class RateLimitModule extends RateLimitConfigurableModule implements OnApplicationShutdown {
  constructor(
    @Inject(RATE_LIMIT_STORE) private readonly store: RateLimitStore,
    private readonly engine: RateLimitEngine,
  ) {
    super();
  }

  /**
   * The module with `options`; with none, the in-process memory store and no `defaultPolicy` (only routes with
   * `@RateLimit` are limited).
   */
  static override forRoot(options: RateLimitModuleOptions & Partial<RateLimitModuleExtras> = {}): DynamicModule {
    return super.forRoot(options);
  }

  async onApplicationShutdown(): Promise<void> {
    this.engine.overrides.stop();
    await this.store.close();
  }
}
