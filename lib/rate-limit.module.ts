import { Inject, Module, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from './algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';
import { RateLimitEngine } from './rate-limit.engine';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_STORE, RateLimitConfigurableModule } from './rate-limit.module-definition';
import { RateLimiterService } from './rate-limiter.service';
import { createStore } from './stores/create-store';
import type { RateLimitStore } from './stores/store.interface';
import { validateModuleOptions } from './utils/validate-options';

/**
 * Rate limiting for Nest. `forRoot(options)` or `forRootAsync({ useFactory, inject })`; global by default.
 * @example RateLimitModule.forRoot({ redis: 'redis://localhost:6379' })
 */
@Module({
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
  ],
  exports: [RateLimiterService, RateLimitEngine, RATE_LIMIT_STORE, RateLimitAlgorithmRegistry],
})
export class RateLimitModule extends RateLimitConfigurableModule implements OnApplicationShutdown {
  constructor(@Inject(RATE_LIMIT_STORE) private readonly store: RateLimitStore) {
    super();
  }

  async onApplicationShutdown(): Promise<void> {
    await this.store.close();
  }
}
