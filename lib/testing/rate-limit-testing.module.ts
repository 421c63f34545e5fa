import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { RateLimitModule } from '../rate-limit.module';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_STORE, type RateLimitModuleExtras } from '../rate-limit.module-definition';
import { createStore } from '../stores/create-store';
import { validateModuleOptions } from '../utils/validate-options';
import { RATE_LIMIT_TEST_START, RateLimitTestClock } from './rate-limit-test-clock';

/** Options of {@link RateLimitTestingModule.forRoot}: the module's, without a store to choose. */
export interface RateLimitTestingOptions extends Omit<RateLimitModuleOptions, 'redis'>, RateLimitModuleExtras {
  /**
   * Where the test clock starts, ms since the epoch.
   * @default RATE_LIMIT_TEST_START (2025-01-01T00:00:00Z)
   */
  startAt?: number;
}

/**
 * `RateLimitModule` for tests: the same guard, decorators and `RateLimiterService`, deciding with the
 * in-process memory store on a {@link RateLimitTestClock} that only moves when the test moves it. Nothing
 * to start, no Redis, exact and instant. Import it instead of `RateLimitModule.forRoot` in a testing module.
 * @example
 * const moduleRef = await Test.createTestingModule({
 *   imports: [RateLimitTestingModule.forRoot({ defaultPolicy: { algorithm: 'fixed-window', limit: 2, window: '1m' } })],
 *   controllers: [CatsController],
 * }).compile();
 * const clock = moduleRef.get(RateLimitTestClock);
 */
@Module({})
export class RateLimitTestingModule {
  static forRoot(options: RateLimitTestingOptions = {}): DynamicModule {
    const { startAt = RATE_LIMIT_TEST_START, ...moduleOptions } = options;
    const clock: Provider = { provide: RateLimitTestClock, useFactory: () => new RateLimitTestClock(startAt) };
    const store: Provider = {
      provide: RATE_LIMIT_STORE,
      inject: [RATE_LIMIT_OPTIONS, RateLimitAlgorithmRegistry, RateLimitTestClock],
      useFactory: (resolved: RateLimitModuleOptions, registry: RateLimitAlgorithmRegistry, testClock: RateLimitTestClock) => {
        validateModuleOptions(resolved);
        return createStore({ ...resolved, redis: undefined }, registry, testClock.now);
      },
    };
    const base = RateLimitModule.forRoot(moduleOptions);
    // A dynamic module's providers are registered after its class's own, so this store replaces the module's.
    const rateLimit: DynamicModule = {
      ...base,
      providers: [...(base.providers ?? []), clock, store],
      exports: [...(base.exports ?? []), RateLimitTestClock],
    };
    return { module: RateLimitTestingModule, global: base.global, imports: [rateLimit], exports: [rateLimit] };
  }
}
