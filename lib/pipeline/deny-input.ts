import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { Duration } from '../interfaces/policy.interface';
import { parseDuration } from '../policy/duration';
import { describeValue } from '../shared/describe-value';
import { MAX_LOCKOUT_MS } from '../stores/lockouts';

// What deny() accepts, checked before anything is written, in the words of its error messages.

/** Longest reason kept with a deny, in UTF-16 code units. */
const MAX_REASON_LENGTH = 256;
/** Half of a surrogate pair on its own: Redis's JSON decoder rejects it (a pair is one code point with `u`). */
const LONE_SURROGATE = /\p{Surrogate}/u;

/** A date's ms, checked: a valid date at most 100 years from this machine's now (the store's clock decides "future"). */
export function dateOf(date: Date): number {
  const at = date.getTime();
  if (!Number.isFinite(at)) throw new RateLimitConfigError(`deny: until: ${String(date)} is not a valid date.`);
  bounded(at - Date.now(), `until: ${date.toISOString()}`);
  return at;
}

/** A store failure of a deny-list call, naming the call, what it means, and the store's own error. */
export function storeFailed(what: string, meaning: string, error: unknown): Error {
  if (error instanceof RateLimitConfigError) return error;
  const message = (error as Error)?.message ?? String(error);
  return new RateLimitStoreError(`${what}: the rate-limit store failed (${message}); ${meaning}.`, { cause: error });
}

/** A deny's duration in ms: a positive duration of at most 100 years. */
export function denyLength(until: Duration): number {
  return bounded(parseDuration(until, 'deny: until'), `until: ${describeValue(until)}`);
}

export function bounded(ms: number, what: string): number {
  if (ms > MAX_LOCKOUT_MS) {
    throw new RateLimitConfigError(`deny: ${what} is more than 100 years away; deny for at most ${MAX_LOCKOUT_MS} ms.`);
  }
  return Math.ceil(ms);
}

/** A deny's reason: a string of at most 256 characters with no lone surrogate, or '' for none. */
export function validReason(reason: string | undefined): string {
  if (reason === undefined) return '';
  const fail = (message: string) => new RateLimitConfigError(`deny: reason: ${message}`);
  if (typeof reason !== 'string') throw fail(`${describeValue(reason)} must be a string.`);
  if (reason.length > MAX_REASON_LENGTH) throw fail(`${reason.length} characters; at most ${MAX_REASON_LENGTH} are kept.`);
  if (LONE_SURROGATE.test(reason))
    throw fail(`${JSON.stringify(reason)} has half of a UTF-16 surrogate pair alone, which Redis cannot store.`);
  return reason;
}
