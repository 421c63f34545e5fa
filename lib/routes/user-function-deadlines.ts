import { RateLimitConfigError } from '../errors/rate-limit-config.error';

/** A policy function's promise still pending: its deadline, what it is, and how it fails. */
interface Pending {
  deadline: number;
  settled: boolean;
  /** Names the function for the error, e.g. `@RateLimit on C.h, policy 2 of 2 ('b'): by`. */
  describe: () => string;
  /** What missing the deadline leads to, for the error. */
  consequence: string;
  reject: (error: Error) => void;
}

/**
 * Deadlines for a policy's own functions (`by`, and `limit`, `window`, `cost` when they are functions): a
 * promise one of them returned that has not settled within `timeoutMs` fails the request with a
 * {@link RateLimitConfigError} naming the route, the policy and the function, so the route's other tracker
 * groups give back what they took instead of holding it (a lease, for its whole window). A function that
 * answers without a promise costs nothing; pending promises share one ticker, which runs only while there
 * are some (no timer per request).
 */
export class UserFunctionDeadlines {
  private readonly pending: Pending[] = [];
  private ticker: NodeJS.Timeout | undefined;

  constructor(
    readonly timeoutMs: number,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /**
   * `value` itself when it is not a promise (or another thenable); otherwise a promise of it that rejects once
   * `timeoutMs` has passed, its error naming the function (`describe`) and what that leads to (`consequence`).
   */
  bound<T>(
    value: T | PromiseLike<T>,
    describe: () => string,
    consequence = 'the request failed and gave back what it had taken',
  ): T | Promise<T> {
    if (!isThenable(value)) return value;
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = { deadline: this.clock() + this.timeoutMs, settled: false, describe, consequence, reject };
      this.pending.push(entry);
      this.startTicker();
      value.then(
        (result) => {
          if (entry.settled) return;
          entry.settled = true;
          resolve(result);
        },
        (error: unknown) => {
          if (entry.settled) return;
          entry.settled = true;
          reject(error as Error);
        },
      );
    });
  }

  /** Fails every promise still pending (application shutdown) and stops the ticker. */
  close(): void {
    clearInterval(this.ticker);
    this.ticker = undefined;
    for (const entry of this.pending.splice(0)) {
      if (entry.settled) continue;
      entry.settled = true;
      entry.reject(new RateLimitConfigError(`${entry.describe()}: the function was still pending when the application shut down.`));
    }
  }

  /** Deadlines are all `timeoutMs` long, so the queue is ordered by deadline: expire from its head. */
  private startTicker(): void {
    if (this.ticker) return;
    const every = Math.max(1, Math.min(10, Math.floor(this.timeoutMs / 4)));
    this.ticker = setInterval(() => this.expire(), every);
    this.ticker.unref();
  }

  private expire(): void {
    const now = this.clock();
    while (this.pending.length > 0 && (this.pending[0].settled || this.pending[0].deadline <= now)) {
      const entry = this.pending.shift()!;
      if (entry.settled) continue;
      entry.settled = true;
      entry.reject(
        new RateLimitConfigError(
          `${entry.describe()}: the function did not settle within ${this.timeoutMs} ms (userFunctionTimeoutMs); ${entry.consequence}.`,
        ),
      );
    }
    if (this.pending.length === 0) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }
}

function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}
