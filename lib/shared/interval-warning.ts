import { Logger } from '@nestjs/common';

/**
 * A warning logged at most once per interval, for failures that can repeat on every request (a throwing
 * listener, a store that refuses refunds): the first tells the operator, the rest would flood the log.
 */
export class IntervalWarning {
  private readonly logger: Logger;
  private lastAt = -Infinity;

  constructor(
    context: string,
    private readonly intervalMs = 10_000,
  ) {
    this.logger = new Logger(context);
  }

  /** Logs `line` unless a warning went out less than the interval ago; a function is called only when it does. */
  warn(line: string | (() => string)): void {
    const now = performance.now();
    if (now - this.lastAt < this.intervalMs) return;
    this.lastAt = now;
    this.logger.warn(typeof line === 'function' ? line() : line);
  }
}
