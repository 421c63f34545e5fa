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

/**
 * A wait error without a stack trace. A burst of calls on a spent quota is turned away by the thousand in one
 * event-loop turn, and capturing each one's stack took ~6 µs (60 ms of blocked loop per 10,000 refusals on a
 * busy 2-core box, garbage besides); the message says what happened and what to change. Each call still gets
 * its own instance of the error class.
 */
function withoutStack<E extends Error>(build: () => E): E {
  const stackTraceLimit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return build();
  } finally {
    Error.stackTraceLimit = stackTraceLimit;
  }
}

function waitError(message: string, retryAfterMs: number, aborted = false): RateLimitWaitError {
  return withoutStack(() => new RateLimitWaitError(message, retryAfterMs, aborted));
}

/**
 * A promise that rejects with `error` two microtasks on, for a call refused at once. By then the caller that
 * returns it from an async function (`RateLimiterService.acquire`) has its handler on it, so V8 and Node never
 * track it as a possibly unhandled rejection, as they do a `Promise.reject` until the handler comes: ~0.2 µs
 * more per refusal, in a burst that refuses thousands in one turn.
 */
export async function refuse(error: Error): Promise<never> {
  await undefined;
  await undefined;
  throw error;
}

/** A call whose turn comes `wait` ms on at the soonest, past its `maxWaitMs`, with `ahead` calls before it. */
export function tooLate(turn: Named, wait: number, maxWaitMs: number, ahead: number): RateLimitWaitError {
  const behind = ahead > 0 ? ` behind ${ahead} earlier call${ahead === 1 ? '' : 's'} of this process` : '';
  return waitError(
    `acquire: '${turn.key}' would wait at least ${wait} ms for policy '${turn.policy}'${behind}, more than maxWaitMs (${maxWaitMs} ms).`,
    wait,
  );
}

/** A call that found `waiting` calls already in line, `maxWaiters` or more; its turn would come `wait` ms on at the soonest. */
export function lineFull(turn: Named, waiting: number, maxWaiters: number, wait: number): RateLimitWaitError {
  return waitError(
    `acquire: ${waiting} calls of this process already wait for '${turn.key}' under policy '${turn.policy}' (maxWaiters ${maxWaiters}).`,
    wait,
  );
}

/** The head was told to retry `retry` ms on (by policy `policy`), past its `maxWaitMs`; or never (`retry` not finite). */
export function retryTooLate(turn: Named, policy: string, limit: number, retry: number, maxWaitMs: number): RateLimitWaitError {
  if (!Number.isFinite(retry)) return waitError(`acquire: the cost can never fit policy '${policy}' (limit ${limit}).`, retry);
  return waitError(`acquire: '${turn.key}' would wait ${retry} ms for policy '${policy}', more than maxWaitMs (${maxWaitMs} ms).`, retry);
}

/** An admitted leaky-bucket call whose slot comes `delay` ms on, past its `maxWaitMs` (the slot was given back). */
export function slotTooLate(turn: Named, delay: number, maxWaitMs: number): RateLimitWaitError {
  return waitError(
    `acquire: '${turn.key}' would wait ${delay} ms for its slot under policy '${turn.policy}', more than maxWaitMs (${maxWaitMs} ms); the slot was given back.`,
    delay,
  );
}

/** A wait, or a leaky-bucket delay, ended by the app closing. */
export function shutdownError(turn: Named, what: 'wait' | 'delay'): RateLimitShutdownError {
  const ended = what === 'wait' ? 'the wait of' : 'the delay of';
  const outcome = what === 'wait' ? 'nothing was taken' : 'its slot was taken';
  const message = `acquire: the application is shutting down; ${ended} '${turn.key}' for policy '${turn.policy}' ended (${outcome}).`;
  return withoutStack(() => new RateLimitShutdownError(message));
}

/** The error of an aborted wait. */
export function abortError(): RateLimitWaitError {
  return waitError('acquire: aborted by its signal.', 0, true);
}
