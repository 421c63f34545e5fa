import { LruMap } from '../../shared/lru-map';
import type { RateLimitCall, StoreDecision } from '../store.interface';
import { Verdict } from '../verdicts';

/**
 * Keys with a higher limit are not tracked: their leases could not be counted in little memory, and a
 * request is rarely turned away by leases of its own instance alone there.
 */
const MAX_TRACKED_LIMIT = 1_024;

/** One `concurrency` lease this process took and has not given back. */
interface Lease {
  cost: number;
  /** Local time by which the store has not yet expired it: the lease window, counted from before the call. */
  expiresAt: number;
}

/**
 * The `concurrency` leases this process holds, by state key. When they alone fill a key (`held + cost >
 * limit`), a rejection of that key stays certain whatever other instances release, until one of these is
 * released here or expires: so it can be shed like a rejection that only time ends. Never overcounts: a
 * lease is counted from the store's answer until its window ends, measured from before the call (the store
 * started its window later), or until it is released here; forgetting one (the bounds) only sheds less.
 * Memory: at most `maxKeys` keys, each with at most about `limit` leases (the expired ones are dropped
 * once a key holds more than its limit; the store never lets more than `limit` be live).
 */
export class LocalLeases {
  private readonly byKey = new LruMap<Map<string, Lease>>();

  constructor(private readonly maxKeys: number) {}

  /** Leases tracked (live or not yet dropped), for tests. */
  get size(): number {
    let n = 0;
    for (const [, leases] of this.byKey) n += leases.size;
    return n;
  }

  /** Records the leases an allowed decision took, asked at local time `askedAt`. */
  took(calls: readonly RateLimitCall[], decision: StoreDecision, askedAt: number): void {
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i];
      // A fallback's answer (`Verdict.StoreUnavailable`) took nothing in the store.
      if (call.algorithm.name !== 'concurrency' || call.cost <= 0 || decision.verdicts[i].reason !== Verdict.Allowed) continue;
      if (call.params.limit > MAX_TRACKED_LIMIT) continue;
      let leases = this.byKey.get(call.stateKey, true);
      if (!leases) {
        if (this.byKey.size >= this.maxKeys) this.byKey.delete(this.byKey.oldest()!);
        this.byKey.set(call.stateKey, (leases = new Map()));
      }
      leases.set(call.token, { cost: call.cost, expiresAt: askedAt + call.params.windowMs });
      if (leases.size > call.params.limit) dropExpired(leases, askedAt);
    }
  }

  /** Forgets the leases `calls` give back (a release). */
  released(calls: readonly RateLimitCall[]): void {
    for (const call of calls) {
      if (call.algorithm.name !== 'concurrency') continue;
      const leases = this.byKey.get(call.stateKey);
      leases?.delete(call.token);
      if (leases?.size === 0) this.byKey.delete(call.stateKey);
    }
  }

  /**
   * How long `call` (a rejected lease request) stays rejected by the leases held here alone, ms; 0 when
   * they do not fill its key (another holder may release, so the store must be asked again).
   */
  certainFor(call: RateLimitCall, now: number): number {
    const leases = this.byKey.get(call.stateKey);
    if (!leases) return 0;
    dropExpired(leases, now);
    const live = [...leases.values()];
    let held = 0;
    for (const lease of live) held += lease.cost;
    let excess = held + call.cost - call.params.limit;
    if (excess <= 0) return 0;
    // Room comes back here once enough of these expire (soonest first).
    live.sort((a, b) => a.expiresAt - b.expiresAt);
    for (const lease of live) {
      excess -= lease.cost;
      if (excess <= 0) return lease.expiresAt - now;
    }
    return 0;
  }

  clear(): void {
    this.byKey.clear();
  }
}

function dropExpired(leases: Map<string, Lease>, now: number): void {
  for (const [token, lease] of leases) if (lease.expiresAt <= now) leases.delete(token);
}
