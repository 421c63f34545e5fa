/** A store failure: Redis unreachable, a timeout, or state under our prefix that is not ours. */
export class RateLimitStoreError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RateLimitStoreError';
  }
}
