/**
 * Longest key a {@link StringMemo} remembers, in UTF-16 code units: every IP tracker, user id, email and API
 * key fits. Longer keys come from clients (a header, a body field) more often than from real callers, and
 * deriving their value again costs little next to receiving them.
 */
const MAX_KEY_LENGTH = 256;
/** Lookups between two readings of the hit rate. */
const WINDOW = 1_024;
/** Below this share of hits, lookups cost more than they save: only one call in {@link PROBE_EVERY} looks. */
const PROBE_BELOW = WINDOW / 10;
const PROBE_EVERY = 8;
/** Bits of the filter that admits a key on its second miss (16 KB, made the first time the memo is full). */
const SEEN_BITS = 1 << 17;

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
 * encoded, concatenated and hashed again by every map it meets.
 *
 * Remembering only pays when keys come back. Every key is taken until the memo is first full; from then
 * on a missed key is taken only on its second miss within as many misses as the memo holds (a filter of
 * bits, nothing retained), and when one is taken into a full memo, the memo is emptied first (O(1), no
 * order to keep). So a working set that fits stays, and gets back in after a flood; keys seen once (a
 * million clients, a scan) are not held, but for about one in twenty-six that the filter mistakes for a
 * repeat: holding them cost more than building them (they outlive young-generation collections, then must
 * be marked and swept); and a cycle of keys more than twice the memo's size leaves what it holds alone. Once
 * the memo has been full, while fewer than a tenth of lookups hit, only one call in eight looks the key up
 * (the others build the value as if there were no memo); the lookups that remain notice when keys come back.
 *
 * Bounded in bytes, whatever clients send: at most `maxSize` keys of at most `maxKeyLength` characters,
 * each held as its own copy (a key sliced out of a larger string, such as one X-Forwarded-For entry, would
 * otherwise keep all of that string alive), and values made from that copy, plus the 16 KB filter. A longer
 * key is not remembered: its value is made again on every call. Up to four keys are held in fields, so a
 * memo per tracker (the engine's) costs no hash table.
 */
export class StringMemo<V> {
  private readonly maxKeyLength: number;
  private readonly ownKeys: boolean;
  /** Every key once a fifth arrives (when `maxSize` allows more than four); until then, the fields below. */
  private map: Map<string, V> | undefined;
  private k0: string | undefined;
  private v0: V | undefined;
  private k1: string | undefined;
  private v1: V | undefined;
  private k2: string | undefined;
  private v2: V | undefined;
  private k3: string | undefined;
  private v3: V | undefined;
  /** Made the first time the memo is full: from then on a key is taken on its second miss. */
  private seen: SeenFilter | undefined;
  private lookups = 0;
  private hits = 0;
  /** 1, or {@link PROBE_EVERY} while the hit rate is low; and the calls until the next lookup. */
  private lookEvery = 1;
  private untilLook = 1;

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
    const map = this.map;
    if (map === undefined) return this.getInline(key);
    if (--this.untilLook !== 0) return this.make(this.own(key));
    this.untilLook = this.lookEvery;
    if (++this.lookups === WINDOW) this.judge();
    const value = map.get(key);
    if (value !== undefined) {
      this.hits++;
      return value;
    }
    const own = this.own(key);
    const made = this.make(own);
    if (this.seen === undefined && map.size < this.maxSize) {
      map.set(own, made);
    } else if ((this.seen ??= new SeenFilter(this.maxSize)).again(key)) {
      if (map.size >= this.maxSize) map.clear();
      map.set(own, made);
    }
    return made;
  }

  /** The key as held: a copy of a client's string, the library's own as it is. */
  private own(key: string): string {
    return this.ownKeys ? key : ownCopy(key);
  }

  /**
   * Reads the hit rate of the last {@link WINDOW} lookups: below a tenth, most calls stop looking, once the memo
   * has been full. Until then every miss is taken, so a call that did not look would leave its key out, and a
   * new working set would take several rounds to be found (each of its calls building its value meanwhile).
   */
  private judge(): void {
    this.lookEvery = this.hits < PROBE_BELOW && this.seen !== undefined ? PROBE_EVERY : 1;
    this.untilLook = 1;
    this.lookups = this.hits = 0;
  }

  /** Up to four keys in fields, compared in turn; the fifth moves them into a Map (when `maxSize` allows). */
  private getInline(key: string): V {
    if (this.k0 === key) return this.v0!;
    if (this.k1 === key) return this.v1!;
    if (this.k2 === key) return this.v2!;
    if (this.k3 === key) return this.v3!;
    const own = this.own(key);
    const made = this.make(own);
    const held = this.k0 === undefined ? 0 : this.k1 === undefined ? 1 : this.k2 === undefined ? 2 : this.k3 === undefined ? 3 : 4;
    if (held >= this.maxSize) {
      // A memo of at most four keys starts over when full, like a large one.
      this.k0 = this.k1 = this.k2 = this.k3 = undefined;
      this.v0 = this.v1 = this.v2 = this.v3 = undefined;
      this.k0 = own;
      this.v0 = made;
    } else if (held === 0) {
      this.k0 = own;
      this.v0 = made;
    } else if (held === 1) {
      this.k1 = own;
      this.v1 = made;
    } else if (held === 2) {
      this.k2 = own;
      this.v2 = made;
    } else if (held === 3) {
      this.k3 = own;
      this.v3 = made;
    } else {
      const map = new Map<string, V>();
      map.set(this.k0!, this.v0!).set(this.k1!, this.v1!).set(this.k2!, this.v2!).set(this.k3!, this.v3!).set(own, made);
      this.map = map;
      this.k0 = this.k1 = this.k2 = this.k3 = undefined;
      this.v0 = this.v1 = this.v2 = this.v3 = undefined;
    }
    return made;
  }
}

/**
 * Which keys missed recently, as bits of a hash (a Bloom filter with one hash): `again(key)` is true when
 * `key`'s bit was set since the last reset, and sets it. Reset every `memoSize` checks (at least 8): a key
 * that comes back within as many misses as the memo holds passes (so a working set the memo can hold gets
 * in again after a flood, even one as large as the memo), and at most 1 in 13 keys seen once passes as seen
 * twice (memo of 10,000 keys; 1 in 26 on average over a reset period).
 */
class SeenFilter {
  private readonly bits = new Int32Array(SEEN_BITS >> 5);
  private readonly checksPerReset: number;
  private untilReset: number;

  constructor(memoSize: number) {
    this.checksPerReset = Math.max(8, memoSize);
    this.untilReset = this.checksPerReset;
  }

  again(key: string): boolean {
    // FNV-1a over the UTF-16 code units.
    let hash = 0x811c9dc5;
    for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
    const bit = hash & (SEEN_BITS - 1);
    const mask = 1 << (bit & 31);
    const word = bit >>> 5;
    const seen = (this.bits[word] & mask) !== 0;
    if (--this.untilReset === 0) {
      this.bits.fill(0);
      this.untilReset = this.checksPerReset;
    } else {
      this.bits[word] |= mask;
    }
    return seen;
  }
}

/**
 * A flat copy of `key` that shares no storage with it. V8 keeps a slice of 13 or more characters as a
 * pointer into the whole string (slicing a concatenation only slices its flattened copy); joining an array
 * allocates one flat string and copies into it, and a flat key also compares faster on every lookup.
 */
function ownCopy(key: string): string {
  // Shorter strings are always flat copies in V8 (no slice or concatenation is kept below 13 characters).
  if (key.length < 13) return key;
  return [key[0], key.slice(1)].join('');
}
