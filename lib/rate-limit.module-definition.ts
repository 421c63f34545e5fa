import { ConfigurableModuleBuilder, type ConfigurableModuleCls } from '@nestjs/common';
import type { RateLimitModuleOptions } from './interfaces/module-options.interface';

/** Options that shape the module itself rather than its behaviour. */
export interface RateLimitModuleExtras {
  /**
   * Make the module global, so `RateLimiterService` can be injected anywhere.
   * @default true
   */
  global?: boolean;
}

const definition = new ConfigurableModuleBuilder<RateLimitModuleOptions>()
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRateLimitOptions')
  .setExtras<RateLimitModuleExtras>({ global: true }, (definition, extras) => ({ ...definition, global: extras.global }))
  .build();

// Written-out types, so the declarations name '@nestjs/common' in a plain import: an inferred type would be
// emitted as import("@nestjs/common", { with: … }), which TypeScript before 5.3 cannot read.
export const RateLimitConfigurableModule: ConfigurableModuleCls<
  RateLimitModuleOptions,
  'forRoot',
  'createRateLimitOptions',
  RateLimitModuleExtras
> = definition.ConfigurableModuleClass;

/** Injection token of the module's options. */
export const RATE_LIMIT_OPTIONS: string | symbol = definition.MODULE_OPTIONS_TOKEN;

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
