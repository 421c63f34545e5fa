import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';

/** Options that shape the module itself rather than its behaviour. */
export interface RateLimitModuleExtras {
  /**
   * Make the module global, so `RateLimiterService` can be injected anywhere.
   * @default true
   */
  global?: boolean;
}

export const {
  ConfigurableModuleClass: RateLimitConfigurableModule,
  MODULE_OPTIONS_TOKEN: RATE_LIMIT_OPTIONS,
  OPTIONS_TYPE: RATE_LIMIT_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: RATE_LIMIT_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RateLimitModuleOptions>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRateLimitOptions')
  .setExtras<RateLimitModuleExtras>({ global: true }, (definition, extras) => ({ ...definition, global: extras.global }))
  .build();

/**
 * A class for `RateLimitModule.forRootAsync({ useClass })` / `useExisting`.
 * @example
 * @Injectable() class RateLimitConfig implements RateLimitOptionsFactory {
 *   constructor(private readonly config: ConfigService) {}
 *   createRateLimitOptions() { return { redis: this.config.get('REDIS_URL') }; }
 * }
 */
export interface RateLimitOptionsFactory {
  createRateLimitOptions(): RateLimitModuleOptions | Promise<RateLimitModuleOptions>;
}

/** Injection token of the store (Redis or memory) the module decides with. */
export const RATE_LIMIT_STORE = Symbol('RATE_LIMIT_STORE');
