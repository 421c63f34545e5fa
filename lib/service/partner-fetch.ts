import { Logger } from '@nestjs/common';
import { RateLimitShutdownError } from '../errors/rate-limit-wait.error';
import type { PartnerResponse } from './partner-response';

/** What {@link obeyPartner} needs from the service. */
export interface PartnerCallSteps {
  /** Waits for the call's turn (`acquire`). */
  acquire(): Promise<unknown>;
  /** Pauses the key as the response asks (`pauseFromResponse`). */
  pause(response: PartnerResponse): Promise<number>;
  /** Reports a pause the store could not record. */
  pauseFailed(error: unknown): void;
}

/**
 * `fn` throttled and listening to the partner: each call waits for its turn, runs, then pauses the key as the
 * response asks — also the response an error carries (axios and got throw for a 429, with `error.response`).
 * The caller gets the response, or the error, either way: the partner's answer is theirs even when the store
 * could not record the pause (that is reported instead).
 */
export function obeyPartner<A extends unknown[], R extends PartnerResponse>(
  fn: (...args: A) => Promise<R>,
  steps: PartnerCallSteps,
): (...args: A) => Promise<R> {
  const listen = async (response: unknown) => {
    if (!isResponse(response)) return;
    try {
      await steps.pause(response);
    } catch (error) {
      steps.pauseFailed(error);
    }
  };
  return async (...args: A) => {
    await steps.acquire();
    let response: R;
    try {
      response = await fn(...args);
    } catch (error) {
      await listen((error as { response?: unknown } | null)?.response);
      throw error;
    }
    await listen(response);
    return response;
  };
}

function isResponse(value: unknown): value is PartnerResponse {
  const headers = (value as PartnerResponse | null)?.headers;
  return typeof value === 'object' && typeof headers === 'object' && headers !== null;
}

/**
 * Pauses the store failed to record, logged at most once per `intervalMs` (with how many more failed
 * meanwhile) and passed to `onError`. A shutdown is not a failure: nothing is recorded after close, by design.
 */
export class PartnerPauseFailures {
  private readonly logger = new Logger('RateLimit');
  private lastLog = -Infinity;
  private suppressed = 0;

  constructor(
    private readonly intervalMs: number,
    private readonly onError?: (error: Error) => void,
  ) {}

  report(error: unknown): void {
    if (error instanceof RateLimitShutdownError) return;
    const err = error instanceof Error ? error : new Error(String(error));
    this.onError?.(err);
    const now = performance.now();
    if (now - this.lastLog < this.intervalMs) {
      this.suppressed++;
      return;
    }
    const more = this.suppressed > 0 ? ` (${this.suppressed} more since the last report)` : '';
    this.logger.warn(`A partner asked to pause, but the rate-limit store did not record the pause${more}: ${err.message}`);
    this.lastLog = now;
    this.suppressed = 0;
  }
}
