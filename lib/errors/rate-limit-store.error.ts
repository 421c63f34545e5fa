/** A store failure: Redis unreachable, a timeout, or state under our prefix that is not ours. */
export class RateLimitStoreError extends Error {
  /**
   * Whether the store cannot serve now (unreachable, out of time, `CLUSTERDOWN`…), as opposed to a failure of
   * this decision alone while the store answers (a key holding someone else's data, a calendar period the
   * store's clock is not in). Only an outage opens the circuit that sends other decisions to `onStoreError`.
   */
  readonly outage: boolean;

  constructor(message: string, options?: { cause?: unknown; outage?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RateLimitStoreError';
    this.outage = options?.outage ?? true;
  }
}
