import { Module, type DynamicModule, type Provider } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { RateLimitModule } from '../rate-limit.module';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_STORE, type RateLimitModuleExtras } from '../rate-limit.module-definition';
import { createStore } from '../pipeline/create-store';
import type { RateLimitStore } from '../stores/store.interface';
import { validateModuleOptions } from '../policy/validate-options';
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
 * to start, no Redis, exact and instant. Import it instead of `RateLimitModule.forRoot` in a testing module,
 * or test your `AppModule` as it is with {@link RateLimitTestingModule.override}.
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
      useFactory: (resolved: RateLimitModuleOptions, registry: RateLimitAlgorithmRegistry, testClock: RateLimitTestClock) =>
        memoryStoreOn(testClock, resolved, registry),
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

  /**
   * Tests an existing app as it is: every `RateLimitModule` the testing module compiles (`forRoot` or
   * `forRootAsync`, Redis configured or not) decides with the memory store on `clock`, through the app's own
   * options, guard and policies. No Redis client is loaded and no connection is made. Returns `builder`, to
   * chain on. The clock is yours: keep the one you pass in (the module has no `RateLimitTestClock` provider).
   *
   * Nest's `overrideModule(RateLimitModule)` cannot do this: it matches imports by identity, and every
   * `forRoot(...)` call returns a new object. This overrides the module's store provider instead
   * (`overrideProvider`, in every Nest version this package supports).
   * @param builder what `Test.createTestingModule(...)` returns
   * @param clock the time the store decides with; one per test, so counters and time start afresh
   * @example
   * const clock = new RateLimitTestClock();
   * const moduleRef = await RateLimitTestingModule.override(Test.createTestingModule({ imports: [AppModule] }), clock).compile();
   * // … two requests pass, the third is rejected, then:
   * clock.advance('1m');
   */
  static override<Builder extends RateLimitOverridable>(builder: Builder, clock: RateLimitTestClock): Builder {
    builder.overrideProvider(RATE_LIMIT_STORE).useFactory({
      factory: (options: RateLimitModuleOptions, registry: RateLimitAlgorithmRegistry) => memoryStoreOn(clock, options, registry),
      inject: [RATE_LIMIT_OPTIONS, RateLimitAlgorithmRegistry],
    });
    return builder;
  }
}

/**
 * The part of `@nestjs/testing`'s `TestingModuleBuilder` that {@link RateLimitTestingModule.override} uses, written
 * out so this entry point needs no `@nestjs/testing` of its own.
 */
type RateLimitOverridable = {
  overrideProvider(token: symbol): { useFactory(options: { factory: (...deps: never[]) => unknown; inject: unknown[] }): unknown };
};

/** What the testing kit decides with: the memory store on the test clock, whatever store `options` name. */
function memoryStoreOn(clock: RateLimitTestClock, options: RateLimitModuleOptions, registry: RateLimitAlgorithmRegistry): RateLimitStore {
  validateModuleOptions(options);
  return createStore({ ...options, redis: undefined }, registry, clock.now);
}
