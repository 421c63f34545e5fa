import { createHash } from 'node:crypto';

/** Trackers made only of `A-Za-z0-9._@-`, and at most this long, are used in keys as they are. */
const MAX_SAFE = 128;
/** The same plus `:` (every `ip:` and `user:` tracker), at most this long: only the colons need encoding. */
const MAX_SAFE_BUT_COLONS = 53;
const MAX_ENCODED = 160;
const SAFE = 1;
const SAFE_BUT_COLONS = 2;

/**
 * Turns a tracker (IP, user id, API key…) into the key part inside the hash tag. Any character that could
 * change the key's layout or its cluster slot (`{`, `}`, `:`, newlines, …) is percent-encoded; long values
 * are replaced by a SHA-256 digest (prefixed with `#`, which encoding never produces), so no client can
 * choose a tracker that lands on another client's key.
 */
export function encodeTracker(tracker: string): string {
  const plain = plainness(tracker);
  if (plain === SAFE) return tracker;
  // Fast path with the same result as the general one below (53 colons still encode within MAX_ENCODED).
  if (plain === SAFE_BUT_COLONS) return tracker.replaceAll(':', '%3A');
  // `u`: a character outside the BMP is one match (its two UTF-16 halves alone would make encodeURIComponent throw).
  const encoded = tracker.replace(/[^A-Za-z0-9._@-]/gu, encodeChar);
  if (encoded.length <= MAX_ENCODED) return encoded;
  // The digest is of the encoded form, which is injective; the raw string is not UTF-8 safe (lone surrogates).
  return `#${createHash('sha256').update(encoded).digest('base64url')}`;
}

/**
 * {@link SAFE} or {@link SAFE_BUT_COLONS} when `tracker` needs no encoding or only its colons encoded, 0
 * otherwise: one pass over its characters (two regular expressions cost more, once per new tracker).
 */
function plainness(tracker: string): number {
  const length = tracker.length;
  if (length === 0 || length > MAX_SAFE) return 0;
  let colons = false;
  for (let i = 0; i < length; i++) {
    const c = tracker.charCodeAt(i);
    if ((c >= 97 && c <= 122) || (c >= 64 && c <= 90) || (c >= 48 && c <= 57) || c === 46 || c === 95 || c === 45) continue;
    if (c !== 58) return 0;
    colons = true;
  }
  if (!colons) return SAFE;
  return length <= MAX_SAFE_BUT_COLONS ? SAFE_BUT_COLONS : 0;
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
