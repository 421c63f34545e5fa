/** A map entry linked into the least-recently-used order. */
interface Node<V> {
  key: string;
  value: V;
  /** Free for the owner: the memory store keeps the entry's expiry here, so one object per key holds it all. */
  expiresAt: number;
  /** The map holding the node; undefined once deleted (see {@link LruMap.holds}). */
  map: LruMap<V> | undefined;
  prev: Node<V> | undefined;
  next: Node<V> | undefined;
}

/** An entry as {@link LruMap.getNode} hands it out: its value and expiry may be changed in place. */
export type LruNode<V> = Pick<Node<V>, 'key' | 'value' | 'expiresAt'>;

/**
 * A string-keyed map that remembers use order, for bounded in-process caches. The order is a linked list,
 * not the Map's own insertion order: finding a Map's first entry walks over every entry deleted since V8
 * last compacted it, which made each eviction O(size) under a flood of distinct keys.
 */
export class LruMap<V> {
  private readonly nodes = new Map<string, Node<V>>();
  private oldestNode: Node<V> | undefined;
  private newestNode: Node<V> | undefined;

  get size(): number {
    return this.nodes.size;
  }

  /** The value under `key`; `touch` makes it the most recently used. */
  get(key: string, touch = false): V | undefined {
    return this.getNode(key, touch)?.value;
  }

  /** The entry under `key`, to read or change in place; `touch` makes it the most recently used. */
  getNode(key: string, touch = false): LruNode<V> | undefined {
    const node = this.nodes.get(key);
    if (node && touch) this.touch(node);
    return node;
  }

  /** Whether `node` (from {@link getNode}) is still this map's entry: not deleted, evicted or cleared since. */
  holds(node: LruNode<V>): boolean {
    return (node as Node<V>).map === this;
  }

  /** Makes `node` (one {@link holds}) the most recently used. */
  touch(node: LruNode<V>): void {
    if (node !== this.newestNode) {
      this.unlink(node as Node<V>);
      this.append(node as Node<V>);
    }
  }

  /** Stores `value` as the most recently used (a key already present keeps its node: no map churn). */
  set(key: string, value: V, expiresAt = 0): LruNode<V> {
    const node = this.nodes.get(key);
    if (node) {
      node.value = value;
      node.expiresAt = expiresAt;
      this.touch(node);
      return node;
    }
    const added: Node<V> = { key, value, expiresAt, map: this, prev: undefined, next: undefined };
    this.nodes.set(key, added);
    this.append(added);
    return added;
  }

  delete(key: string): boolean {
    const node = this.nodes.get(key);
    if (!node) return false;
    this.nodes.delete(key);
    this.unlink(node);
    node.map = undefined;
    return true;
  }

  clear(): void {
    for (const node of this.nodes.values()) node.map = undefined;
    this.nodes.clear();
    this.oldestNode = this.newestNode = undefined;
  }

  /** The least recently used key. */
  oldest(): string | undefined {
    return this.oldestNode?.key;
  }

  /** Every entry, least recently used first. */
  *[Symbol.iterator](): Generator<[string, V]> {
    yield* this.oldestFirst(Infinity);
  }

  /** Deletes those of the `count` least recently used entries that expired before `now` (see {@link LruNode.expiresAt}). */
  pruneExpired(count: number, now: number): void {
    let node = this.oldestNode;
    for (let i = 0; node && i < count; i++) {
      const next = node.next;
      if (now > node.expiresAt) this.delete(node.key);
      node = next;
    }
  }

  /** Up to `count` entries, least recently used first (safe to delete the yielded key while iterating). */
  *oldestFirst(count: number): Generator<[string, V]> {
    let node = this.oldestNode;
    for (let i = 0; node && i < count; i++) {
      const next = node.next;
      yield [node.key, node.value];
      node = next;
    }
  }

  private append(node: Node<V>): void {
    node.prev = this.newestNode;
    node.next = undefined;
    if (this.newestNode) this.newestNode.next = node;
    else this.oldestNode = node;
    this.newestNode = node;
  }

  private unlink(node: Node<V>): void {
    if (node.prev) node.prev.next = node.next;
    else this.oldestNode = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.newestNode = node.prev;
    node.prev = node.next = undefined;
  }
}
