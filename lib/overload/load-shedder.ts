import type {
  RateLimitCriticality,
  RateLimitLoadSheddingOptions,
  RateLimitPressure,
  RateLimitSheddingEvent,
  RateLimitSheddingLevel,
} from '../interfaces/overload.interface';
import type { PressureSource } from './process-pressure';

const LEVELS: readonly RateLimitSheddingLevel[] = ['none', 'sheddable', 'default'];

/** `loadShedding`'s defaults. */
export const LOAD_SHEDDING_DEFAULTS = { eventLoopDelayMs: 100, eventLoopUtilization: 0.98, sampleIntervalMs: 1000 } as const;

/** What a {@link LoadShedder} reads and tells. */
export interface LoadShedderDeps {
  options: RateLimitLoadSheddingOptions;
  source: PressureSource;
  /** Called once per change of level (the event bus and the log line). */
  changed: (event: RateLimitSheddingEvent) => void;
}

/**
 * Refuses calls while the process is under pressure, the least critical first: at each sample, pressure
 * moves it one class up (`none` → `sheddable` → `default`), its absence one class down, so a load that comes
 * and goes every interval moves it at most once per interval and never straight from nothing to `default`.
 * `'critical'` calls are never refused by it. No timer of its own: {@link sample} is called every
 * `sampleIntervalMs` by the module (and directly by tests).
 */
export class LoadShedder {
  private levelIndex = 0;
  private readonly thresholds: Required<Omit<RateLimitLoadSheddingOptions, 'heapUsedRatio' | 'sampleIntervalMs'>> & {
    heapUsedRatio: number | undefined;
  };

  constructor(private readonly deps: LoadShedderDeps) {
    const { options } = deps;
    this.thresholds = {
      eventLoopDelayMs: options.eventLoopDelayMs ?? LOAD_SHEDDING_DEFAULTS.eventLoopDelayMs,
      eventLoopUtilization: options.eventLoopUtilization ?? LOAD_SHEDDING_DEFAULTS.eventLoopUtilization,
      heapUsedRatio: options.heapUsedRatio,
    };
  }

  /** What it refuses now. */
  get level(): RateLimitSheddingLevel {
    return LEVELS[this.levelIndex];
  }

  /** `Retry-After` of a refusal: the interval, after which the shedder may have stepped down. */
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil((this.deps.options.sampleIntervalMs ?? LOAD_SHEDDING_DEFAULTS.sampleIntervalMs) / 1000));
  }

  /** Whether a call of `criticality` is refused now. */
  refuses(criticality: RateLimitCriticality): boolean {
    const level = this.levelIndex;
    return level !== 0 && (criticality === 'sheddable' || (level === 2 && criticality === 'default'));
  }

  /** Reads the signals of the interval that ended and moves by at most one class. */
  sample(): void {
    const pressure = this.deps.source.read();
    const previous = this.levelIndex;
    this.levelIndex = this.pressured(pressure) ? Math.min(2, previous + 1) : Math.max(0, previous - 1);
    if (this.levelIndex !== previous) this.deps.changed({ level: this.level, previous: LEVELS[previous], pressure });
  }

  private pressured({ eventLoopDelayMs, eventLoopUtilization, heapUsedRatio }: RateLimitPressure): boolean {
    const t = this.thresholds;
    return (
      eventLoopDelayMs > t.eventLoopDelayMs ||
      eventLoopUtilization > t.eventLoopUtilization ||
      (t.heapUsedRatio !== undefined && heapUsedRatio > t.heapUsedRatio)
    );
  }
}
