import { monitorEventLoopDelay, performance, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import type { RateLimitPressure } from '../interfaces/overload.interface';

/** Where the shedder reads the process's pressure: the real process, or a test's signal. */
export interface PressureSource {
  /** The readings since the previous call (the first: since {@link start}). */
  read(): RateLimitPressure;
  start?(): void;
  stop?(): void;
}

/**
 * This process's pressure: the longest event-loop delay (`monitorEventLoopDelay`, 10 ms resolution), the
 * event-loop utilisation and the heap in use against its limit, each over the interval since the last read.
 */
export class ProcessPressure implements PressureSource {
  private histogram: IntervalHistogram | undefined;
  private last: EventLoopUtilization | undefined;

  start(): void {
    this.histogram = monitorEventLoopDelay({ resolution: 10 });
    this.histogram.enable();
    this.last = performance.eventLoopUtilization();
  }

  read(): RateLimitPressure {
    const histogram = this.histogram;
    const eventLoopDelayMs = histogram && histogram.count > 0 ? histogram.max / 1e6 : 0;
    histogram?.reset();
    const now = performance.eventLoopUtilization();
    const eventLoopUtilization = this.last ? performance.eventLoopUtilization(now, this.last).utilization : 0;
    this.last = now;
    const heapUsedRatio = process.memoryUsage().heapUsed / getHeapStatistics().heap_size_limit;
    return { eventLoopDelayMs, eventLoopUtilization, heapUsedRatio };
  }

  stop(): void {
    this.histogram?.disable();
  }
}
