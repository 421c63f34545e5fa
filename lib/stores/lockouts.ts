import { MAX_LOCKOUT_MS, type LockoutEscalation } from '../policy/compile-escalation';

export { MAX_LOCKOUT_MS };
import type { StoreDecision, StoreVerdict } from './store.interface';
import { Verdict } from './verdicts';

/**
 * What a lockout (or deny) key holds, as decide.lua writes `<until>[:<offences>][|<note>]`: a plain
 * lockout is its end alone (a number, as before escalation existed); an escalating policy's lockout also
 * counts the offences, and a deny keeps its reason as the note.
 */
export type LockoutValue = number | LockoutRecord;

/** A lockout with its offence count or its note. */
export interface LockoutRecord {
  /** End of the lockout, store ms. */
  until: number;
  /** Lockouts of an escalating policy since it was last forgiven; 0 otherwise. */
  offences: number;
  /** Text kept with it (a deny's reason); '' for none. */
  note: string;
}

/** A lockout to write: its length, the value to store and how long the key lives, ms. */
export interface LockoutWrite {
  lengthMs: number;
  value: LockoutValue;
  ttlMs: number;
}

/** The end of a stored lockout, store ms. */
export function lockoutUntil(value: LockoutValue): number {
  return typeof value === 'number' ? value : value.until;
}

/**
 * The lockout a rejection starts (decide.lua's `lockoutFor`): `blockForMs`, or for an escalating policy the
 * n-th lockout since the last forgiveness, `min(blockFor × factor^(n−1), max)`. Its key outlives it by
 * `forgiveAfter`, to remember the count; a count whose quiet time has passed is forgotten.
 */
export function newLockout(
  blockForMs: number,
  escalate: LockoutEscalation | undefined,
  previous: LockoutValue | undefined,
  now: number,
): LockoutWrite {
  if (escalate === undefined) return { lengthMs: blockForMs, value: now + blockForMs, ttlMs: blockForMs };
  const { factor, maxMs, forgiveAfterMs } = escalate;
  const offences = previous !== undefined && now < lockoutUntil(previous) + forgiveAfterMs ? offencesOf(previous) : 0;
  let length = blockForMs;
  // At most ~42 steps: the cap is at most 2^42 times the first lockout.
  for (let i = 0; i < offences; i++) {
    length *= factor;
    if (length >= maxMs) {
      length = maxMs;
      break;
    }
  }
  return { lengthMs: length, value: { until: now + length, offences: offences + 1, note: '' }, ttlMs: length + forgiveAfterMs };
}

/**
 * `block()` (decide.lua's `extendLockout`): a lockout of `ms` from now, unless one in force ends as late or
 * later (never shortened); an escalating policy keeps its unforgiven offence count, `note` is kept with it
 * (a deny's reason). `undefined` when nothing changes.
 */
export function extendedLockout(
  previous: LockoutValue | undefined,
  now: number,
  ms: number,
  escalate: LockoutEscalation | undefined,
  note: string,
): Omit<LockoutWrite, 'lengthMs'> | undefined {
  const until = now + ms;
  let offences = 0;
  if (previous !== undefined) {
    const before = lockoutUntil(previous);
    if (before >= until) return undefined;
    if (escalate !== undefined && now < before + escalate.forgiveAfterMs) offences = offencesOf(previous);
  }
  if (offences === 0 && note === '') return { value: until, ttlMs: ms };
  return { value: { until, offences, note }, ttlMs: offences > 0 ? ms + escalate!.forgiveAfterMs : ms };
}

function offencesOf(value: LockoutValue): number {
  return typeof value === 'number' ? 0 : value.offences;
}

/** The note of a stored deny ('' for none). */
export function lockoutNote(value: LockoutValue): string {
  return typeof value === 'number' ? '' : value.note;
}

/**
 * A decision of `policies` verdicts, all rejected by a deny with `leftMs` to go (`Verdict.Denied`; the public
 * decision calls it `blocked`), as decide.lua replies it.
 */
export function deniedDecision(policies: number, leftMs: number, nowMs: number, note: string): StoreDecision {
  const verdicts = new Array<StoreVerdict>(policies);
  for (let i = 0; i < policies; i++) {
    verdicts[i] = {
      allowed: false,
      remaining: 0,
      resetMs: leftMs,
      retryAfterMs: leftMs,
      delayMs: 0,
      moreQuotaMs: leftMs,
      reason: Verdict.Denied,
    };
    if (note !== '') verdicts[i].note = note;
  }
  return { nowMs, allowed: false, verdicts };
}
