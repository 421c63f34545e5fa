import type { INestApplicationContext } from '@nestjs/common';
import type { RateLimitPressure } from '../../lib/interfaces/overload.interface';
import { ProcessPressure } from '../../lib/overload/process-pressure';
import { RateLimitLoadShedding } from '../../lib/overload/rate-limit-load-shedding';

/** Readings far over every threshold, and far under them. */
const PRESSED: RateLimitPressure = { eventLoopDelayMs: 10_000, eventLoopUtilization: 1, heapUsedRatio: 0.1 };
const CALM: RateLimitPressure = { eventLoopDelayMs: 0, eventLoopUtilization: 0, heapUsedRatio: 0.1 };

/**
 * Moves the load shedder of `app` through its pressure signal rather than the real CPU: the process's
 * readings are replaced by the test's own, and each call samples once, as the module's timer would (give
 * the module a long `sampleIntervalMs` so that timer never fires during the test). So the test passes the
 * same on an idle machine and on one with every core busy.
 */
export function pressureSignal(app: INestApplicationContext): { press(): void; calm(): void; restore(): void } {
  let reading = CALM;
  const read = jest.spyOn(ProcessPressure.prototype, 'read').mockImplementation(() => reading);
  const shedder = app.get(RateLimitLoadShedding).shedder;
  if (shedder === undefined) throw new Error('pressureSignal: the app has no loadShedding option');
  const sample = (next: RateLimitPressure) => {
    reading = next;
    shedder.sample();
  };
  return { press: () => sample(PRESSED), calm: () => sample(CALM), restore: () => read.mockRestore() };
}
