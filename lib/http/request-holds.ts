import { Injectable, type BeforeApplicationShutdown } from '@nestjs/common';

/**
 * Holds admitted requests for their `leaky-bucket` delay (shaping) without blocking the event loop. Every
 * pending hold is tracked, and application shutdown ends them all at once, so no timer outlives
 * `app.close()`: held requests then proceed immediately.
 */
@Injectable()
export class RateLimitHolds implements BeforeApplicationShutdown {
  private readonly pending = new Map<NodeJS.Timeout, () => void>();

  /** Resolves after `ms` milliseconds, or as soon as the application shuts down. */
  hold(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(timer);
        resolve();
      }, ms);
      this.pending.set(timer, resolve);
    });
  }

  /** Number of requests currently held. */
  get size(): number {
    return this.pending.size;
  }

  beforeApplicationShutdown(): void {
    for (const [timer, resolve] of this.pending) {
      clearTimeout(timer);
      resolve();
    }
    this.pending.clear();
  }
}
