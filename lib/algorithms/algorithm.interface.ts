import type { RateLimitAlgorithmName } from '../interfaces/policy.interface';
import type { CalendarPeriods } from './calendar-periods';

/**
 * The numbers an algorithm decides with, resolved for one request. Integers; times in milliseconds.
 * `burst` is only read by the bucket algorithms (it defaults to `limit`).
 */
export interface AlgorithmParams {
  limit: number;
  /** The window; for a calendar window, the length of the period holding this host's now (what `w` states). */
  windowMs: number;
  burst: number;
  /** A `fixed-window` calendar window: its periods around now, the window being the one that holds the store's now. */
  periods?: CalendarPeriods;
}

/**
 * One algorithm's verdict before it is committed. Mirrors, field for field, what its Lua fragment returns.
 * `retryAfterMs` is only meaningful when rejected; `ttlMs` is how long the committed state must live.
 */
export interface AlgorithmVerdict<S> {
  allowed: boolean;
  remaining: number;
  resetMs: number;
  retryAfterMs: number;
  delayMs: number;
  /**
   * Ms until `remaining` grows by at least one unit with no other traffic, measured on the state this verdict
   * leaves (charged when allowed, unchanged when rejected); 0 when nothing is used.
   */
  moreQuotaMs: number;
  /** State to store if the decision is committed (allowed and consuming). */
  next: S | undefined;
  /** Lifetime of `next` in ms; 0 means the state equals "no state" and can be deleted. */
  ttlMs: number;
  /**
   * The current state re-expressed for changed params (a change of units, not a charge), stored whatever
   * the outcome — as the Lua fragment writes it during its check.
   */
  rewrite?: AlgorithmRefund<S>;
}

/** State after a refund; `ttlMs` 0 means the state equals "no state". */
export interface AlgorithmRefund<S> {
  next: S | undefined;
  ttlMs: number;
}

/**
 * An algorithm exists twice with the same decisions: as a Lua fragment run inside Redis (`lua`, one
 * `ALG[id] = { check, commit, refund }` table) and as this TypeScript twin run by the memory store.
 * Twins are pure: state in, verdict and next state out; the store owns time, expiry and atomicity.
 */
export interface RateLimitAlgorithm<S = unknown> {
  readonly name: RateLimitAlgorithmName;
  /** Dispatch number shared with the Lua fragment. */
  readonly id: number;
  /**
   * Short tag appended to the state key, so changing a policy's algorithm never reads foreign state. A new
   * state layout takes a new tag, so state written in the old one is never misread (it expires unused).
   */
  readonly keyTag: string;
  /** Redis type of the state key, used to name the key when someone else's data sits under our prefix. */
  readonly redisType: 'string' | 'zset';
  /** Whether capacity is `burst` (bucket algorithms) rather than `limit`. */
  readonly usesBurst: boolean;
  /** The Lua fragment's source, read once when the module loads. */
  readonly lua: string;
  check(state: S | undefined, params: AlgorithmParams, cost: number, nowMs: number, token: string): AlgorithmVerdict<S>;
  /**
   * Gives back `cost` units taken earlier (`countOnly`), or releases a lease (`concurrency`, identified by
   * `token`). Returns the new state and its lifetime, or `undefined` when there is nothing to give back.
   * A negative `cost` is a penalty: it charges `-cost` units whatever the counter says (never a lease).
   */
  refund(state: S | undefined, params: AlgorithmParams, cost: number, nowMs: number, token: string): AlgorithmRefund<S> | undefined;
}
