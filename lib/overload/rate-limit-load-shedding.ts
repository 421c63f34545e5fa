import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { RateLimitEvents } from '../events/rate-limit-events';
import type { RateLimitSheddingEvent } from '../interfaces/overload.interface';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { RATE_LIMIT_OPTIONS } from '../rate-limit.module-definition';
import { LOAD_SHEDDING_DEFAULTS, LoadShedder } from './load-shedder';
import { ProcessPressure } from './process-pressure';

/**
 * The module's load shedder (option `loadShedding`), reading this process's pressure every
 * `sampleIntervalMs` from bootstrap to shutdown on an unref'd timer; `shedder` is `undefined` without the
 * option. Each change of level is published (`shedding` hook and event) and logged once.
 */
@Injectable()
export class RateLimitLoadShedding implements OnApplicationBootstrap, OnApplicationShutdown {
  readonly shedder: LoadShedder | undefined;
  private readonly source = new ProcessPressure();
  private readonly logger = new Logger('RateLimitLoadShedding');
  private timer: NodeJS.Timeout | undefined;

  constructor(
    @Inject(RATE_LIMIT_OPTIONS) private readonly options: RateLimitModuleOptions,
    events: RateLimitEvents,
  ) {
    const { loadShedding } = options;
    if (loadShedding === undefined) return;
    this.shedder = new LoadShedder({
      options: loadShedding,
      source: this.source,
      changed: (event) => {
        this.logger.log(describe(event));
        events.hooks.shedding?.(event);
      },
    });
  }

  onApplicationBootstrap(): void {
    const shedder = this.shedder;
    if (shedder === undefined || this.timer !== undefined) return;
    this.source.start();
    this.timer = setInterval(
      () => shedder.sample(),
      this.options.loadShedding?.sampleIntervalMs ?? LOAD_SHEDDING_DEFAULTS.sampleIntervalMs,
    );
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.source.stop();
  }
}

/** The log line of a change. */
export function describe({ level, previous, pressure }: RateLimitSheddingEvent): string {
  const readings = `event-loop delay ${Math.round(pressure.eventLoopDelayMs)} ms, utilisation ${pressure.eventLoopUtilization.toFixed(2)}, heap ${pressure.heapUsedRatio.toFixed(2)}`;
  if (level === 'none') return `load shedding off (was refusing '${previous}' calls): ${readings}`;
  const refused = level === 'sheddable' ? `'sheddable'` : `'sheddable' and 'default'`;
  return `load shedding: refusing ${refused} calls (was ${previous === 'none' ? 'off' : `refusing up to '${previous}'`}): ${readings}`;
}
