/** The circuit of a store without shards, or of keys of no known shard. */
const WHOLE = '';

/**
 * The circuit and shard bookkeeping of {@link ResilientStore}: which shard holds a key, until when decisions
 * skip each shard, and when each last answered (which tells a slow call from a store that is down). Kept apart
 * so the store reads as what it does on a failure, not how it remembers one.
 */
export class StoreCircuits {
  /**
   * Per shard ({@link WHOLE} without shards): until when decisions skip it. A circuit found closed again is
   * dropped, so while the store answers the map is empty and decisions read neither it nor the clock.
   */
  private readonly openUntil = new Map<string, number>();
  /**
   * Per shard: when the latest call it answered was sent, which tells a slow call from a store that is down
   * (a record, so that an answer costs one lookup).
   */
  private readonly answeredSentAt = new Map<string, { sentAt: number }>();
  /** The same for {@link WHOLE} (every call, without shards): a field, not a Map entry written per answer. */
  private wholeAnsweredSentAt = -Infinity;

  /**
   * @param shardOfKey which part of the store holds a key (`ResilientStoreOptions.shardOf`)
   * @param clock monotonic time source, ms
   */
  constructor(
    private readonly shardOfKey: ((key: string) => string | undefined) | undefined,
    private readonly clock: () => number,
  ) {}

  /** Whether no circuit is open, as while the store answers: then not even a key's shard need be found. */
  get allClosed(): boolean {
    return this.openUntil.size === 0;
  }

  /** The shard holding `key` (`shardOf`); undefined without `shardOf`, or for a key of no known shard. */
  shardOf(key: string | undefined): string | undefined {
    return key === undefined ? undefined : this.shardOfKey?.(key);
  }

  /** Whether decisions for the shard (undefined: the whole store) skip the store for now. */
  isOpen(shard: string | undefined): boolean {
    if (this.openUntil.size === 0) return false;
    const circuit = shard ?? WHOLE;
    const until = this.openUntil.get(circuit);
    if (until === undefined) return false;
    if (this.clock() < until) return true;
    this.openUntil.delete(circuit); // closed again: the next decisions need not read the clock for it
    return false;
  }

  /** Opens the shard's circuit (undefined: the whole store's) until `until`, monotonic ms. */
  open(shard: string | undefined, until: number): void {
    this.openUntil.set(shard ?? WHOLE, until);
  }

  /** When the latest call the shard answered was sent (−Infinity: none yet). */
  lastAnswered(shard: string | undefined): number {
    return shard === undefined ? this.wholeAnsweredSentAt : (this.answeredSentAt.get(shard)?.sentAt ?? -Infinity);
  }

  /** Records that the shard (undefined: the whole store) answered a call sent at `sentAt`. */
  answered(sentAt: number, shard: string | undefined): void {
    if (shard === undefined) {
      if (this.wholeAnsweredSentAt < sentAt) this.wholeAnsweredSentAt = sentAt;
    } else {
      const last = this.answeredSentAt.get(shard);
      if (last === undefined) this.answeredSentAt.set(shard, { sentAt });
      else if (last.sentAt < sentAt) last.sentAt = sentAt;
    }
  }
}
