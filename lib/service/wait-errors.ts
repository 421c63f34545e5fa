import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitShutdownError, RateLimitWaitError } from '../errors/rate-limit-wait.error';
import { describeValue } from '../utils/describe-value';

/** What the errors of a wait name: the tracker and the policy. */
interface Named {
  key: string;
  policy: string;
}

/** `acquire()`'s own options, checked at each call (they are not known at bootstrap). */
export function checkWaitOptions(maxWaitMs: unknown, maxWaiters: unknown): void {
  if (typeof maxWaitMs !== 'number' || Number.isNaN(maxWaitMs) || maxWaitMs < 0) {
    throw new RateLimitConfigError(
      `acquire: maxWaitMs: ${describeValue(maxWaitMs)} must be a number of milliseconds ≥ 0 (Infinity: no limit).`,
    );
  }
  if (typeof maxWaiters !== 'number' || !Number.isInteger(maxWaiters) || maxWaiters < 1) {
    throw new RateLimitConfigError(`acquire: maxWaiters: ${describeValue(maxWaiters)} must be a whole number ≥ 1.`);
  }
}

/** A call whose turn comes `wait` ms on at the soonest, past its `maxWaitMs`, with `ahead` calls before it. */
export function tooLate(turn: Named, wait: number, maxWaitMs: number, ahead: number): RateLimitWaitError {
  const behind = ahead > 0 ? ` behind ${ahead} earlier call${ahead === 1 ? '' : 's'} of this process` : '';
  return new RateLimitWaitError(
    `acquire: '${turn.key}' would wait at least ${wait} ms for policy '${turn.policy}'${behind}, more than maxWaitMs (${maxWaitMs} ms).`,
    wait,
  );
}

/** A wait, or a leaky-bucket delay, ended by the app closing. */
export function shutdownError(turn: Named, what: 'wait' | 'delay'): RateLimitShutdownError {
  const ended = what === 'wait' ? 'the wait of' : 'the delay of';
  const outcome = what === 'wait' ? 'nothing was taken' : 'its slot was taken';
  return new RateLimitShutdownError(
    `acquire: the application is shutting down; ${ended} '${turn.key}' for policy '${turn.policy}' ended (${outcome}).`,
  );
}

/** The error of an aborted wait. */
export function abortError(): RateLimitWaitError {
  return new RateLimitWaitError('acquire: aborted by its signal.', 0, true);
}
