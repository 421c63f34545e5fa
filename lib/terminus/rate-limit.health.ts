import { Inject, Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_STORE } from '../rate-limit.module-definition';
import { pingStore } from '../stores/store-health';
import type { RateLimitStore } from '../stores/store.interface';

/**
 * A `@nestjs/terminus` health indicator (an optional peer dependency) for the rate-limit store: `up` when
 * Redis answers `PING` within `storeTimeoutMs`, `down` with the reason otherwise; the in-process memory
 * store is always up. Each check is one `PING`, never a decision. Provide it in a module that imports
 * `TerminusModule` (`RateLimitModule` must be visible there: it is global by default).
 * @example
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.rateLimit.isHealthy('rate-limit')]); }
 */
@Injectable()
export class RateLimitHealthIndicator {
  constructor(
    @Inject(RATE_LIMIT_STORE) private readonly store: RateLimitStore,
    @Inject(RATE_LIMIT_OPTIONS) private readonly options: RateLimitModuleOptions,
    private readonly health: HealthIndicatorService,
  ) {}

  /**
   * `{ [key]: { status: 'up', store } }`, or `{ [key]: { status: 'down', store, message } }` when the store
   * does not answer; `store` is `'redis'` or `'memory'`.
   */
  async isHealthy<const Key extends string>(key: Key): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.health.check(key);
    const store = this.options.redis === undefined ? 'memory' : 'redis';
    try {
      await pingStore(this.store);
      return indicator.up({ store });
    } catch (error) {
      return indicator.down({ store, message: error instanceof Error ? error.message : String(error) });
    }
  }
}
