/**
 * `acquire()` gave up: waiting for the quota would take longer than `maxWaitMs`, or the signal aborted.
 * `retryAfterMs` says how long the caller would have had to wait.
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
