import { LruMap, type LruNode } from '../../shared/lru-map';
import type { StateSlot } from '../store.interface';

/** Entries examined per write by the incremental sweep (no timer per key, no timer at all). */
const SWEEP_BATCH = 8;

/**
 * The keys of {@link MemoryStore}, as Redis holds them: each key's value and expiry (absolute ms; gone once
 * `now > expiresAt`), least recently used first, with a tracker's state entry kept in its slot so its next
 * decision makes no lookup, and an incremental sweep and the `maxKeys` bound run on each new key. Kept apart so
 * the store reads as the decision steps of `decide.lua`.
 */
export class MemoryKeyspace {
  /** Each key's value, and in its node its expiry (absolute ms; gone once `now > expiresAt`, as Redis expires keys). */
  private readonly entries = new LruMap<unknown>();

  /** @param maxKeys most keys held; past it the least recently used are evicted */
  constructor(private readonly maxKeys: number) {}

  /** Number of keys held. */
  get size(): number {
    return this.entries.size;
  }

  /** Drops `key` and its value. */
  delete(key: string): void {
    this.entries.delete(key);
  }

  /** Drops every key. */
  clear(): void {
    this.entries.clear();
  }

  /** The live value under `key` (an expired one stays, see {@link readState}); `touch` marks it most recently used. */
  read(key: string, now: number, touch = false): unknown {
    return liveValue(this.entries.getNode(key, touch), now);
  }

  /**
   * The entry of state key `key`, made the most recently used: the one `slot` holds while that is still this
   * store's, else looked up (and the slot filled), so a tracker's next decision makes no lookup.
   */
  private stateEntry(key: string, slot: StateSlot | undefined): LruNode<unknown> | undefined {
    const held = slot?.entry as LruNode<unknown> | undefined;
    if (held !== undefined && this.entries.holds(held)) {
      this.entries.touch(held);
      return held;
    }
    const entry = this.entries.getNode(key, true);
    if (slot !== undefined && entry !== undefined) slot.entry = entry;
    return entry;
  }

  /**
   * The live state under `key` (see {@link stateEntry}). An expired entry stays, as Redis keeps an expired key
   * until something removes it: the decision's write reuses it in place, and the sweep or `maxKeys` drops it
   * otherwise. (A short-lived state, such as a bucket that refills within a millisecond, would else cost a
   * delete and an insert on every decision.)
   */
  readState(key: string, slot: StateSlot | undefined, now: number): unknown {
    return liveValue(this.stateEntry(key, slot), now);
  }

  /** Stores the state under `key` for `ttlMs` (0 or no value = delete), through `slot` as {@link stateEntry}. */
  writeState(key: string, slot: StateSlot | undefined, value: unknown, ttlMs: number, now: number): void {
    const held = slot?.entry as LruNode<unknown> | undefined;
    const entry = this.write(key, value, ttlMs, now, held !== undefined && this.entries.holds(held) ? held : undefined);
    if (slot !== undefined) slot.entry = entry;
  }

  /**
   * Stores `value` for `ttlMs` (0 or no value = delete), most recently used last: in `entry` when it is the
   * key's (found already), else looked up or added. Returns the key's entry, undefined once deleted.
   */
  write(key: string, value: unknown, ttlMs: number, now: number, entry?: LruNode<unknown>): LruNode<unknown> | undefined {
    if (value === undefined || ttlMs <= 0) {
      this.entries.delete(key);
      return undefined;
    }
    if (entry) {
      entry.value = value;
      entry.expiresAt = now + ttlMs;
      this.entries.touch(entry);
      return entry;
    }
    // One lookup: set keeps a present key's entry, and only a new key grows the store.
    const size = this.entries.size;
    const node = this.entries.set(key, value, now + ttlMs);
    if (this.entries.size > size) this.sweep(now);
    return node;
  }

  /**
   * Drops a few expired entries from the least recently used end, and evicts past `maxKeys`: on each new key,
   * the only write that grows the store (an update in place leaves the cold end alone). Below a tenth of
   * `maxKeys` nothing is swept: there an expired entry costs less kept for its key's next write than dropped
   * and made again.
   */
  private sweep(now: number): void {
    if (this.entries.size > this.maxKeys / 10) this.entries.pruneExpired(SWEEP_BATCH, now);
    while (this.entries.size > this.maxKeys) this.entries.delete(this.entries.oldest()!);
  }
}

/** The value of `entry` unless it has expired by `now` (as Redis expires keys: gone once `now > expiresAt`). */
function liveValue(entry: LruNode<unknown> | undefined, now: number): unknown {
  return entry === undefined || now > entry.expiresAt ? undefined : entry.value;
}
