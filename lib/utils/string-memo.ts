/**
 * A bounded memo of values derived from strings, for the request path: the same client recurs on every one
 * of its requests, and a string that is reused keeps its hash, where a key built anew per request is
 * encoded, concatenated and hashed again by every map it meets. Emptied whole when full: O(1), no order
 * to keep; a flood of distinct strings only costs what building them did before.
 */
export class StringMemo<V> {
  private readonly values = new Map<string, V>();

  constructor(
    private readonly make: (key: string) => V,
    private readonly maxSize = 10_000,
  ) {}

  get(key: string): V {
    let value = this.values.get(key);
    if (value === undefined) {
      if (this.values.size >= this.maxSize) this.values.clear();
      value = this.make(key);
      this.values.set(key, value);
    }
    return value;
  }
}
