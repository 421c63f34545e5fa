/**
 * `acquire()` gave up: waiting for the quota would take longer than `maxWaitMs`, the signal aborted, or the
 * application is shutting down ({@link RateLimitShutdownError}). `retryAfterMs` says how long the caller would
 * have had to wait.
 */
export class RateLimitWaitError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number,
    readonly aborted = false,
  ) {
    super(message);
    this.name = 'RateLimitWaitError';
  }
}

/**
 * The application is shutting down (`app.close()`, or a signal with shutdown hooks enabled): every pending
 * `acquire()` wait ends with this error at once, and once the module has closed its store every
 * `RateLimiterService` call rejects with it instead of deciding. `retryAfterMs` is `Infinity`: this process
 * grants nothing more.
 * @example
 * try { await limiter.acquire(partnerPolicy, 'partner-api'); }
 * catch (error) { if (error instanceof RateLimitShutdownError) return; throw error; }
 */
export class RateLimitShutdownError extends RateLimitWaitError {
  constructor(message: string) {
    super(message, Infinity);
    this.name = 'RateLimitShutdownError';
  }
}
