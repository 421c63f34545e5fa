/**
 * Thrown for invalid options or policies, at bootstrap whenever the value is known then. The message names
 * the field, the bad value and what is allowed.
 */
export class RateLimitConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RateLimitConfigError';
  }
}
