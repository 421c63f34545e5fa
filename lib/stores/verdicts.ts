/**
 * What decided one policy's verdict, named once for the decision scripts and TypeScript alike: the Lua scripts
 * get these codes as `VERDICT_*` locals (see {@link VERDICT_PRELUDE}), write them as each verdict's status, and
 * the codec reads that status back as the same name. The public reason a decision reports is the engine's
 * mapping of these (`RateLimitEngine`).
 */
export const Verdict = {
  /** The policy's counter allowed. */
  Allowed: 0,
  /** The policy's counter rejected. */
  Limited: 1,
  /** A lockout (`blockFor`, `block()`, an escalation) rejected. */
  Blocked: 2,
  /** The cost exceeds what the policy can ever hold, so no wait helps: retry after −1 (never). */
  CostExceedsCapacity: 3,
  /** The store did not answer and the call's fallback (`onStoreError`) decided, either way. Never in a script reply. */
  StoreUnavailable: 4,
  /** The tracker is denied (`deny()`): every policy rejects, and the deny's reason comes with the verdict. */
  Denied: 5,
  /**
   * The policy's reserve refused: the cost would fit the counter, but not with the units the policy keeps for
   * higher criticalities (`reserve`). Answered with a 503, not a 429: it is the capacity, not the client's quota.
   */
  Reserved: 6,
} as const;

/** One of the {@link Verdict} codes. */
export type Verdict = (typeof Verdict)[keyof typeof Verdict];

/**
 * The Lua locals every composed decision script starts with (lib/stores/redis/redis-scripts.ts splices them in
 * where a script's `--@verdicts` marker stands), made from {@link Verdict}: `local VERDICT_ALLOWED = 0`,
 * `local VERDICT_LIMITED = 1`, … (`CostExceedsCapacity` → `VERDICT_COST_EXCEEDS_CAPACITY`). The scripts write
 * verdicts by these names; the numbers live above only.
 */
export const VERDICT_PRELUDE: string = Object.entries(Verdict)
  .map(([name, code]) => `local VERDICT_${name.replace(/(?<=[a-z])(?=[A-Z])/g, '_').toUpperCase()} = ${code}`)
  .join('\n');
