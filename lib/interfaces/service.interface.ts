import type { RateLimitDecision } from './decision.interface';
import type { RateLimitCriticality } from './overload.interface';
import type { Duration } from './policy.interface';

/** Options of `RateLimiterService.pauseFromResponse` and `wrapFetch`. */
export interface PartnerPauseOptions {
  /**
   * Longest pause a response may ask for; a longer one is cut to it (a partner's `Retry-After: 99999999`
   * would otherwise stop every call for three years).
   * @default '1d'
   */
  maxPause?: Duration;
}

/** Options of one programmatic decision. */
export interface ConsumeOptions {
  /** Units to take. @default the policy's cost, or 1 */
  cost?: number;
  /**
   * The work's criticality, for policies with a `reserve`: a `'default'` or `'sheddable'` call leaves the share
   * kept for those above it untaken (refused with reason `'reserved'`).
   * @default 'default'
   */
  priority?: RateLimitCriticality;
}

/** Options of {@link RateLimiterService.lease}. */
export type LeaseOptions = Pick<ConsumeOptions, 'priority'>;

/** The decisions of several policies taken together. */
export interface MultiDecision {
  /** True when every policy allowed (and all were charged); false when none was charged. */
  allowed: boolean;
  decisions: RateLimitDecision[];
}

/** Options of {@link RateLimiterService.acquire}: its calls are `'default'` ones for a policy's `reserve`. */
export interface AcquireOptions extends Pick<ConsumeOptions, 'cost'> {
  /**
   * Longest the call may wait for its turn, ms: `acquire` rejects at once when its turn cannot come in time
   * (see {@link RateLimiterService.acquire}).
   * @default Infinity
   */
  maxWaitMs?: number;
  /**
   * Most calls of this process that may wait on this policy + key at once (this one included); past it
   * `acquire` rejects at once. Waiting calls are served first come, first served.
   * @default the module's `maxWaiters` (1000)
   */
  maxWaiters?: number;
  /** Aborts the wait. */
  signal?: AbortSignal;
}

/** Options of {@link RateLimiterService.wrapFetch}: the wait's, and the longest pause a response may ask for. */
export interface WrapFetchOptions extends AcquireOptions, PartnerPauseOptions {}

/** A concurrency lease: holds one slot until released (or until the policy's window expires it). */
export interface RateLimitLease {
  decision: RateLimitDecision;
  /** Gives the slot back; safe to call more than once. */
  release(): Promise<void>;
  /**
   * Heartbeat for long work: moves the lease's expiry to now + `ms` (default: the policy's window) on the
   * store's clock, atomically, never earlier than it was. Resolves `true` while the lease is held; `false`
   * once it was released, was never granted, or has expired (its slot may belong to another holder now:
   * stop the work or take a new lease). Rejects with a RateLimitStoreError when the store does not answer
   * (whether the lease is held is then unknown). Call it well within the window, e.g. every third of it.
   * @example
   * const lease = await limiter.lease({ algorithm: 'concurrency', limit: 2, window: '30s' }, tenantId);
   * const beat = setInterval(() => void lease.extend().then((held) => held || controller.abort()), 10_000);
   * try { await runExport(controller.signal); } finally { clearInterval(beat); await lease.release(); }
   */
  extend(ms?: Duration): Promise<boolean>;
}
