import { Inject, Module, type CanActivate, type OnApplicationShutdown } from '@nestjs/common';
import { APP_GUARD, DiscoveryModule } from '@nestjs/core';
import { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import { RateLimitHolds } from './http/request-holds';
import { RateLimitEngine } from './rate-limit.engine';
import { RateLimitGuard } from './rate-limit.guard';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_STORE, RateLimitConfigurableModule } from './rate-limit.module-definition';
import { RateLimiterService } from './rate-limiter.service';
import { RateLimitRouteRegistry } from './routes/route-registry';
import { createStore } from './stores/create-store';
import type { RateLimitStore } from './stores/store.interface';
import { validateModuleOptions } from './utils/validate-options';

/** Stands in for the global guard when `registerGuard: false`. */
const ALLOW_ALL: CanActivate = { canActivate: () => true };

/**
 * Rate limiting for Nest. `forRoot(options)` or `forRootAsync({ useFactory, inject })`; global by default.
 * @example RateLimitModule.forRoot({ redis: 'redis://localhost:6379' })
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    { provide: RateLimitAlgorithmRegistry, useFactory: () => new RateLimitAlgorithmRegistry() },
    {
      provide: RATE_LIMIT_STORE,
      inject: [RATE_LIMIT_OPTIONS, RateLimitAlgorithmRegistry],
      useFactory: (options: RateLimitModuleOptions, registry: RateLimitAlgorithmRegistry) => {
        validateModuleOptions(options);
        return createStore(options, registry);
      },
    },
    {
      provide: RateLimitEngine,
      inject: [RATE_LIMIT_STORE, RATE_LIMIT_OPTIONS],
      useFactory: (store: RateLimitStore, options: RateLimitModuleOptions) => new RateLimitEngine(store, options),
    },
    RateLimiterService,
    RateLimitRouteRegistry,
    RateLimitHolds,
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
    RateLimitEngine,
    RATE_LIMIT_STORE,
    RATE_LIMIT_OPTIONS,
    RateLimitAlgorithmRegistry,
    RateLimitRouteRegistry,
    RateLimitHolds,
    RateLimitGuard,
  ],
})
export class RateLimitModule extends RateLimitConfigurableModule implements OnApplicationShutdown {
  constructor(@Inject(RATE_LIMIT_STORE) private readonly store: RateLimitStore) {
    super();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}
