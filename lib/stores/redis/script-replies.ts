import { isServerReply } from './transports/redis-transport';

/**
 * What a server's error replies to a decision script mean for the decision: whether the server cannot serve now,
 * and whether anything ran (so the decision may go again without being charged twice).
 */

/** Replies of a server (or a slot) that cannot serve now, whatever the decision. */
export const OUTAGE_REPLY = /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|BUSY|READONLY|OOM|NOAUTH|NOPERM|WRONGPASS|MISCONF|NOREPLICAS)\b/;

/**
 * A decision's error in a script across slots when its master cannot serve its keys now: they are not local (a
 * moved or moving slot) or the cluster is down. Nothing of the decision ran.
 */
export const NOT_HERE = /Script attempted to (access a non local key|execute a (write )?command while the cluster is down)/;

/**
 * Errors after which Redis ran nothing: the script was missing, the key's slot is served elsewhere or not now,
 * or the call reached a replica (a master demoted since the slot map was read: a script's first write fails
 * there, after reads only).
 */
export function nothingRan(error: Error): boolean {
  return /^(NOSCRIPT|MOVED|ASK|TRYAGAIN|CLUSTERDOWN|READONLY) /.test(error.message);
}

/**
 * Whether the server refused a script across slots as a whole: an error reply other than an outage's (which
 * says the server cannot serve now). Before Redis 7.0 (and on KeyDB) the shebang line does not compile; a server
 * that knows no `allow-cross-slot-keys` flag rejects it. A decision's own error comes back in its place
 * (decide.lua runs each in `pcall`), so an error for the whole call means that nothing ran.
 */
export function cannotRunAcrossSlots(error: unknown): boolean {
  return error instanceof Error && isServerReply(error) && !OUTAGE_REPLY.test(error.message);
}
