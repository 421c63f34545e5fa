import { LruMap } from '../shared/lru-map';
import type { RateLimitCall, RateLimitStore, StoreVerdict } from '../stores/store.interface';

/**
 * Keys holding a slice at most; beyond it the least recently used key gives its slice back. The keys are the
 * library's own short strings (long trackers are hashed), so the map stays small in bytes too.
 */
const MAX_SLICED_KEYS = 10_000;
/** How often slices past their lifetime are given back, ms. */
const SWEEP_INTERVAL_MS = 250;

/** Units taken from the store ahead of the requests that spend them. */
export interface Slice {
  /** The call that took it (keys, algorithm, params), to give back what is left. */
  call: RateLimitCall;
  units: number;
  /** The store's time of the grant, ms: the give-back names it, so no unit returns into a later window. */
  grantedAtStore: number;
  /** Local time the grant was asked for; the store's times are counted down from here, so never late. */
  askedAt: number;
  /** Local time after which the slice is not spent any more. */
  expiresAt: number;
  /** The store's verdict on the grant, which answers spent from the slice report (counted down). */
  verdict: StoreVerdict;
  /** Given back: units reserved in it and not spent go back to the store, not to a later slice. */
  retired: boolean;
}

/** What this instance remembers of one sliced key. */
export interface SlicedKey {
  slice: Slice | undefined;
  /** A grant in flight: other requests for the key wait for it instead of taking slices of their own. */
  refilling: Promise<unknown> | undefined;
  /** The store could not grant a whole slice: decide exactly until an answer shows room for one again. */
  exact: boolean;
}

/**
 * The slices {@link SlicingStore} holds, per key, and their give-back: a key's entry kept in bounds (the least
 * recently used key gives its slice back), slices past their lifetime swept back to the store, and the
 * give-backs in flight that `close` waits for. Kept apart so the store reads as how a decision is planned.
 */
export class HeldSlices {
  private readonly keys = new LruMap<SlicedKey>();
  /** Give-backs in flight, which `close` waits for. */
  private readonly givingBack = new Set<Promise<void>>();
  private sweeper: NodeJS.Timeout | undefined;

  /**
   * @param inner the store the slices were taken from, and are given back to
   * @param clock local time in ms; only its differences are read
   */
  constructor(
    private readonly inner: RateLimitStore,
    private readonly clock: () => number,
  ) {}

  /** The key's entry, if it has one (its place in the least-recently-used order unchanged). */
  get(key: string): SlicedKey | undefined {
    return this.keys.get(key);
  }

  /** Forgets the key, and its slice with it (a `reset`: none of its units may be spent after it). */
  delete(key: string): void {
    this.keys.delete(key);
  }

  /** Gives every slice back, and waits for the give-backs in flight. */
  async close(): Promise<void> {
    this.stopSweeping();
    for (const [, entry] of this.keys) this.giveBack(entry);
    this.keys.clear();
    await Promise.all(this.givingBack);
  }

  /** The key's entry, made (and the map kept in bounds, the sweep running) when new. */
  entry(key: string): SlicedKey {
    let entry = this.keys.get(key, true);
    if (entry) return entry;
    entry = { slice: undefined, refilling: undefined, exact: false };
    this.keys.set(key, entry);
    if (this.keys.size > MAX_SLICED_KEYS) {
      const oldest = this.keys.oldest()!;
      this.giveBack(this.keys.get(oldest)!);
      this.keys.delete(oldest);
    }
    this.startSweeping();
    return entry;
  }

  /** Retires the key's slice and gives what is left of it back to the store. */
  giveBack(entry: SlicedKey): void {
    const slice = entry.slice;
    entry.slice = undefined;
    if (!slice) return;
    slice.retired = true;
    if (slice.units > 0) this.refundTo(slice, slice.units);
    slice.units = 0;
  }

  /** Gives `units` of `slice` back to the store (never thrown: an outage loses at most the slice). */
  refundTo(slice: Slice, units: number): void {
    const call: RateLimitCall = { ...slice.call, cost: units, token: String(slice.grantedAtStore) };
    const done: Promise<void> = this.inner
      .refund([call])
      .catch(() => undefined)
      .finally(() => this.givingBack.delete(done));
    this.givingBack.add(done);
  }

  private startSweeping(): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  private stopSweeping(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** Gives back expired slices and drops keys with nothing left to remember. */
  private sweep(): void {
    const now = this.clock();
    for (const [key, entry] of this.keys) {
      if (entry.slice && now >= entry.slice.expiresAt) this.giveBack(entry);
      if (!entry.slice && !entry.refilling && !entry.exact) this.keys.delete(key);
    }
    if (this.keys.size === 0) this.stopSweeping();
  }
}
