import { createHash } from 'node:crypto';

/** Trackers made only of these characters, and not too long, are used in keys as they are. */
const SAFE_TRACKER = /^[A-Za-z0-9._@-]{1,128}$/;
const MAX_ENCODED = 160;

/**
 * Turns a tracker (IP, user id, API key…) into the key part inside the hash tag. Any character that could
 * change the key's layout or its cluster slot (`{`, `}`, `:`, newlines, …) is percent-encoded; long values
 * are replaced by a SHA-256 digest (prefixed with `#`, which encoding never produces), so no client can
 * choose a tracker that lands on another client's key.
 */
export function encodeTracker(tracker: string): string {
  if (SAFE_TRACKER.test(tracker)) return tracker;
  const encoded = tracker.replace(/[^A-Za-z0-9._@-]/g, (c) => encodeURIComponent(c).replace(/[!'()*~]/g, hex));
  if (encoded.length <= MAX_ENCODED) return encoded;
  return `#${createHash('sha256').update(tracker).digest('base64url')}`;
}

function hex(c: string): string {
  return `%${c.charCodeAt(0).toString(16).toUpperCase()}`;
}

/** The part of every key of one tracker up to and including its hash tag: `<prefix>:{<tracker>}:`. */
export function trackerKeyPrefix(prefix: string, tracker: string): string {
  return `${prefix}:{${encodeTracker(tracker)}}:`;
}
