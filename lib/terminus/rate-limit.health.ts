import { Inject, Injectable, Optional } from '@nestjs/common';
import * as terminus from '@nestjs/terminus';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import type { RateLimitSheddingLevel } from '../interfaces/overload.interface';
import { RateLimitLoadShedding } from '../overload/rate-limit-load-shedding';
import { RATE_LIMIT_OPTIONS, RATE_LIMIT_STORE } from '../rate-limit.module-definition';
import { pingStore } from '../stores/store-health';
import type { RateLimitStore } from '../stores/store.interface';

/** What {@link RateLimitHealthIndicator.isHealthy} reports under its key (a terminus `HealthIndicatorResult`). */
export type RateLimitHealthResult<Key extends string> = Record<
  Key,
  {
    status: 'up' | 'down';
    store: 'redis' | 'memory';
    message?: string;
    /** Redis only: the 99th percentile of the time Redis took to answer lately, ms (what `storeTimeoutMs` judges). */
    storeLatencyMs?: number;
    /** Redis only: the 99th percentile of this process's event-loop delay while calls were in flight, ms (not counted by deadlines). */
    eventLoopDelayMs?: number;
    /** With `loadShedding`: what the load shedder refuses now (it does not make the check `down`). */
    shedding?: RateLimitSheddingLevel;
  }
>;

/**
 * Terminus 11 and later read a returned `down` result; terminus 10 counts an indicator as down only when it
 * throws a HealthCheckError, which it recognises by its `isHealthCheckError` flag. Terminus 11 is the first
 * to export `HealthIndicatorService`.
 */
const readsDownResults = 'HealthIndicatorService' in terminus;

/**
 * A `@nestjs/terminus` health indicator (an optional peer dependency, terminus 10 to 12) for the rate-limit
 * store: `up` when Redis answers `PING` within `storeTimeoutMs`, `down` with the reason otherwise; the
 * in-process memory store is always up. Each check is one `PING`, never a decision. Provide it in a module
 * that imports `TerminusModule` (`RateLimitModule` must be visible there: it is global by default).
 * @example
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.rateLimit.isHealthy('rate-limit')]); }
 */
@Injectable()
export class RateLimitHealthIndicator {
  constructor(
    @Inject(RATE_LIMIT_STORE) private readonly store: RateLimitStore,
    @Inject(RATE_LIMIT_OPTIONS) private readonly options: RateLimitModuleOptions,
    @Optional() private readonly shedding?: RateLimitLoadShedding,
  ) {}

  /**
   * `{ [key]: { status: 'up', store } }`, or `{ [key]: { status: 'down', store, message } }` when the store
   * does not answer; `store` is `'redis'` or `'memory'`.
   */
  async isHealthy<const Key extends string>(key: Key): Promise<RateLimitHealthResult<Key>> {
    const store = this.options.redis === undefined ? 'memory' : 'redis';
    const timings = this.store.timings?.();
    const shedder = this.shedding?.shedder;
    const lately = {
      ...(timings ? { storeLatencyMs: timings.storeLatencyMs.p99, eventLoopDelayMs: timings.eventLoopDelayMs.p99 } : {}),
      ...(shedder ? { shedding: shedder.level } : {}),
    };
    try {
      await pingStore(this.store);
      return { [key]: { status: 'up', store, ...lately } } as RateLimitHealthResult<Key>;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const down = { [key]: { status: 'down', store, message, ...lately } } as RateLimitHealthResult<Key>;
      if (readsDownResults) return down;
      throw Object.assign(new Error(message), { isHealthCheckError: true, causes: down });
    }
  }
}
