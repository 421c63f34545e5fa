import { createHash } from 'node:crypto';

/** Trackers made only of these characters, and not too long, are used in keys as they are. */
const SAFE_TRACKER = /^[A-Za-z0-9._@-]{1,128}$/;
/** The same plus `:` (every `ip:` and `user:` tracker): only the colons need encoding. */
const SAFE_BUT_COLONS = /^[A-Za-z0-9._@:-]{1,53}$/;
const MAX_ENCODED = 160;

/**
 * Turns a tracker (IP, user id, API key…) into the key part inside the hash tag. Any character that could
 * change the key's layout or its cluster slot (`{`, `}`, `:`, newlines, …) is percent-encoded; long values
 * are replaced by a SHA-256 digest (prefixed with `#`, which encoding never produces), so no client can
 * choose a tracker that lands on another client's key.
 */
export function encodeTracker(tracker: string): string {
  if (SAFE_TRACKER.test(tracker)) return tracker;
  // Fast path with the same result as the general one below (53 colons still encode within MAX_ENCODED).
  if (SAFE_BUT_COLONS.test(tracker)) return tracker.replaceAll(':', '%3A');
  // `u`: a character outside the BMP is one match (its two UTF-16 halves alone would make encodeURIComponent throw).
  const encoded = tracker.replace(/[^A-Za-z0-9._@-]/gu, encodeChar);
  if (encoded.length <= MAX_ENCODED) return encoded;
  // The digest is of the encoded form, which is injective; the raw string is not UTF-8 safe (lone surrogates).
  return `#${createHash('sha256').update(encoded).digest('base64url')}`;
}

/** Percent-encodes one code point; a lone surrogate (malformed UTF-16) becomes `%uXXXX`, which nothing else produces. */
function encodeChar(c: string): string {
  const code = c.charCodeAt(0);
  if (c.length === 1 && code >= 0xd800 && code <= 0xdfff) return `%u${code.toString(16).toUpperCase()}`;
  return encodeURIComponent(c).replace(/[!'()*~]/g, hex);
}

function hex(c: string): string {
  return `%${c.charCodeAt(0).toString(16).toUpperCase()}`;
}

/**
 * What follows a tracker's key prefix in its deny-list key, `<prefix>:{<tracker>}:deny`. No policy key can be
 * it: theirs are `<scope>:<name>:<tag>`, with two colons.
 */
export const DENY_KEY_SUFFIX = 'deny';

/** The part of every key of one tracker up to and including its hash tag: `<prefix>:{<tracker>}:`. */
export function trackerKeyPrefix(prefix: string, tracker: string): string {
  return `${prefix}:{${encodeTracker(tracker)}}:`;
}
