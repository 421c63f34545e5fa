/**
 * Most denies in force at once on a remote store (Redis). Every instance holds all of them in memory, so
 * `deny()` of one more tracker is refused beyond it (a `RateLimitConfigError`); a deny that ended frees its
 * place. The memory store keeps its denies as it keeps lockouts, bounded by its `maxKeys`.
 */
export const MAX_DENIES = 100_000;

/**
 * Most changes the deny channel logs (one entry per tracker changed, its last change): an instance further
 * behind than this, at a poll every 500 ms, reads every deny in force again instead of what changed.
 */
export const MAX_DENY_LOG = 10_000;

/**
 * How long the deny channel's keys live after a write at least, ms (and at least until the last deny's end):
 * an instance that comes back later reads every deny in force again.
 */
export const DENY_CHANNEL_KEEP_MS = 10 * 60_000;
