/**
 * Longest key a {@link StringMemo} remembers, in UTF-16 code units: every IP tracker, user id, email and API
 * key fits. Longer keys come from clients (a header, a body field) more often than from real callers, and
 * deriving their value again costs little next to receiving them.
 */
const MAX_KEY_LENGTH = 256;

/** Options of a {@link StringMemo}. */
export interface StringMemoOptions {
  /** Longest key remembered, in UTF-16 code units. @default 256 */
  maxKeyLength?: number;
  /**
   * Whether keys are the library's own strings (policy suffixes, keys it built), which need no copy: they
   * cannot be slices of something a client sent.
   * @default false
   */
  ownKeys?: boolean;
}

/**
 * A bounded memo of values derived from strings, for the request path: the same client recurs on every one
 * of its requests, and a string that is reused keeps its hash, where a key built anew per request is
 * encoded, concatenated and hashed again by every map it meets. Emptied whole when full: O(1), no order
 * to keep; a flood of distinct strings only costs what building them did before.
 *
 * Bounded in bytes, whatever clients send: at most `maxSize` keys of at most `maxKeyLength` characters,
 * each held as its own copy (a key sliced out of a larger string, such as one X-Forwarded-For entry, would
 * otherwise keep all of that string alive), and values made from that copy. A longer key is not
 * remembered: its value is made again on every call.
 */
export class StringMemo<V> {
  private readonly values = new Map<string, V>();
  private readonly maxKeyLength: number;
  private readonly ownKeys: boolean;

  constructor(
    private readonly make: (key: string) => V,
    private readonly maxSize = 10_000,
    options: StringMemoOptions = {},
  ) {
    this.maxKeyLength = options.maxKeyLength ?? MAX_KEY_LENGTH;
    this.ownKeys = options.ownKeys ?? false;
  }

  get(key: string): V {
    if (key.length > this.maxKeyLength) return this.make(key);
    let value = this.values.get(key);
    if (value === undefined) {
      if (this.values.size >= this.maxSize) this.values.clear();
      const own = this.ownKeys ? key : ownCopy(key);
      value = this.make(own);
      this.values.set(own, value);
    }
    return value;
  }
}

/**
 * A flat copy of `key` that shares no storage with it. V8 keeps a slice of 13 or more characters as a
 * pointer into the whole string (slicing a concatenation only slices its flattened copy); joining an array
 * allocates one flat string and copies into it, and a flat key also compares faster on every lookup.
 */
function ownCopy(key: string): string {
  return [key[0], key.slice(1)].join('');
}
