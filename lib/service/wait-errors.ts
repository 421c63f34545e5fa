import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitShutdownError, RateLimitWaitError } from '../errors/rate-limit-wait.error';
import { describeValue } from '../shared/describe-value';

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
 * event-loop turn, and capturing each one's stack cost more than the rest of the refusal (bench/README.md,
 * acquire bursts); the message says what happened and what to change. Each call still gets its own instance.
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

/** The message of a call whose turn comes `wait` ms on at the soonest, past its `maxWaitMs`, with `ahead` calls before it. */
function tooLateMessage(turn: Named, wait: number, maxWaitMs: number, ahead: number): string {
  const behind = ahead > 0 ? ` behind ${ahead} earlier call${ahead === 1 ? '' : 's'} of this process` : '';
  return `acquire: '${turn.key}' would wait at least ${wait} ms for policy '${turn.policy}'${behind}, more than maxWaitMs (${maxWaitMs} ms).`;
}

/** The message of a call that found `waiting` calls already in line, `maxWaiters` or more. */
function lineFullMessage(turn: Named, waiting: number, maxWaiters: number): string {
  return `acquire: ${waiting} calls of this process already wait for '${turn.key}' under policy '${turn.policy}' (maxWaiters ${maxWaiters}).`;
}

/**
 * The last message of one kind, built again only when what it says changes: a burst refuses thousands of
 * calls in one turn with the same words (the same line, the same wait to the ms), and joining a message anew
 * for each was most of what building its error cost. One entry: nothing to bound.
 */
class LastMessage {
  private key: string | undefined;
  private policy: string | undefined;
  private a = NaN;
  private b = NaN;
  private c = NaN;
  private text = '';

  constructor(private readonly build: (turn: Named, a: number, b: number, c: number) => string) {}

  of(turn: Named, a: number, b: number, c = 0): string {
    if (turn.key !== this.key || turn.policy !== this.policy || a !== this.a || b !== this.b || c !== this.c) {
      this.text = this.build(turn, a, b, c);
      this.key = turn.key;
      this.policy = turn.policy;
      this.a = a;
      this.b = b;
      this.c = c;
    }
    return this.text;
  }
}

/**
 * The refusals of one process's waits: their errors, and the promises of calls refused at once, rejected
 * together, in the order refused, one microtask on. By then each caller has its handler on its promise (an
 * `await`, or a `.then` in the same turn), so V8 and Node never track them as possibly unhandled rejections,
 * as they do a `Promise.reject` until its handler comes; and a burst that refuses thousands of calls in one
 * turn makes one pending promise per call and one microtask in all, where an `async` function per refusal
 * made three promises and two microtasks each.
 */
export class WaitRefusals {
  private rejects: Array<(error: Error) => void> = [];
  private errors: Error[] = [];
  private readonly tooLateMessages = new LastMessage(tooLateMessage);
  private readonly lineFullMessages = new LastMessage(lineFullMessage);

  /** A call whose turn comes `wait` ms on at the soonest, past its `maxWaitMs`, with `ahead` calls before it. */
  tooLate(turn: Named, wait: number, maxWaitMs: number, ahead: number): RateLimitWaitError {
    return waitError(this.tooLateMessages.of(turn, wait, maxWaitMs, ahead), wait);
  }

  /** A call that found `waiting` calls already in line, `maxWaiters` or more; its turn would come `wait` ms on at the soonest. */
  lineFull(turn: Named, waiting: number, maxWaiters: number, wait: number): RateLimitWaitError {
    return waitError(this.lineFullMessages.of(turn, waiting, maxWaiters), wait);
  }

  /** A promise that rejects with `error` one microtask on. */
  refuse(error: Error): Promise<never> {
    // A promise job, not queueMicrotask, which fake timers (jest, sinon) hold back.
    if (this.errors.push(error) === 1) void Promise.resolve().then(this.flush);
    return new Promise<never>(this.enqueue);
  }

  /** The executor of every refused promise: one function, no closure per call. */
  private readonly enqueue = (_resolve: unknown, reject: (error: Error) => void): void => {
    this.rejects.push(reject);
  };

  private readonly flush = (): void => {
    const { rejects, errors } = this;
    this.rejects = [];
    this.errors = [];
    for (let i = 0; i < rejects.length; i++) rejects[i](errors[i]);
  };
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
