import type { AlgorithmParams, RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import type { LockoutEscalation } from '../policy/compile-escalation';
import type { Verdict } from './verdicts';

/** How long the store and this process each took, in ms, over the last 1,024 calls or ticks. */
export interface StoreTimings {
  /** Time the store took to answer (what the deadline judges): median, 99th percentile and largest. */
  storeLatencyMs: { p50: number; p99: number; max: number };
  /** This process's own delays seen while calls were in flight (event-loop stalls), which no deadline counts. */
  eventLoopDelayMs: { p50: number; p99: number; max: number };
}

/** Most policies decided together in one store call (routes and `consumeAll` are checked against it). */
export const MAX_POLICIES_PER_DECISION = 8;

/** See {@link RateLimitCall.stateSlot}: opaque to everyone but the store that fills it. */
export interface StateSlot {
  entry: unknown;
}

/** A key, and the slot a store may fill to find its entry again (see {@link RateLimitCall.stateSlot}). */
export interface KeySlot extends StateSlot {
  readonly key: string;
}

/** One policy's part of a decision, fully resolved: what the store needs and nothing else. */
export interface RateLimitCall {
  algorithm: RateLimitAlgorithm;
  params: AlgorithmParams;
  /** Units to take (or to give back, for a refund). */
  cost: number;
  /**
   * Units this call must leave untaken: the share of the capacity the policy's `reserve` keeps for higher
   * criticalities than the call's. The counter is checked with `cost + hold`, but only `cost` is charged; a
   * call that would fit without the hold is refused with `Verdict.Reserved`. 0 or absent: none.
   */
  hold?: number;
  /** Lockout length after a rejection (an escalating policy's first); 0 = none. */
  blockForMs: number;
  /** How lockouts grow for a repeat offender (policy `escalate`); absent: every lockout lasts `blockForMs`. */
  escalate?: LockoutEscalation;
  /** Key of the algorithm's state. */
  stateKey: string;
  /**
   * Where an in-process store last found `stateKey`'s entry, kept beside the tracker's keys so the next
   * decision of the tracker finds it without a lookup; other stores leave it alone. Absent: look it up.
   */
  stateSlot?: StateSlot;
  /** Key of the policy's lockout. */
  blockKey: string;
  /** Lease id for `concurrency`; in a `block`, the note kept with the lockout (a deny's reason); '' otherwise. */
  token: string;
  /**
   * The tracker's deny-list key, the same for every call of one decision: a decision finds it set rejects
   * every policy (`Verdict.Denied`). Absent: no deny list applies (a lease's renewal).
   */
  denyKey?: string;
  /** What this call gets when the store fails or misses its deadline. */
  fallback: StoreFallback;
  /**
   * Whether units may be given back later (`countOnly`, `settle`, a reservation), so a rejection is not final
   * until its retry time, and the decision's `nowMs` must be the store's reading (a settlement says when it charged).
   */
  refundable: boolean;
  /** Units an instance takes from the store at a time and spends in-process (policy `slice`); 0 or absent: none. */
  slice?: number;
}

/**
 * `fail-open` allows, `fail-closed` rejects, `insurance` decides with an in-process store holding a share
 * of the limit until the store answers again.
 */
export type StoreFallback = 'fail-open' | 'fail-closed' | 'insurance';

/** One policy's verdict, as the Lua script replies it. `retryAfterMs` −1 = never. */
export interface StoreVerdict {
  allowed: boolean;
  remaining: number;
  resetMs: number;
  retryAfterMs: number;
  delayMs: number;
  /** Ms until more quota is made available (see {@link RateLimitDecision.moreQuotaMs}). */
  moreQuotaMs: number;
  /** What decided it: the counter (`Allowed`, `Limited`), a lockout, the capacity, a fallback or a deny. */
  reason: Verdict;
  /** A deny's reason (`Verdict.Denied`), when it has one. */
  note?: string;
}

/** The verdicts of one decision and the store time it was made at. */
export interface StoreDecision {
  /** The store's clock (Redis `TIME`, or the memory store's clock), in ms. */
  nowMs: number;
  /** True when every policy allowed (and, when consuming, all were charged). */
  allowed: boolean;
  verdicts: StoreVerdict[];
}

/**
 * The keys runtime overrides live under, one hash tag so a Cluster keeps them on one master: the overrides
 * (a hash of field `<policy>\n<tracker pattern>` to the override's JSON), the set's version (a counter every
 * write moves on), each override's end (a sorted set of fields by `until`, store ms), and the instances that
 * polled them lately (a sorted set of instance ids by their last poll, store ms, with a TTL: the heartbeat).
 */
export interface OverrideKeys {
  overrides: string;
  version: string;
  expiries: string;
  instances: string;
  /** The deny list's channel, read in the same poll; absent: the poll reads the overrides alone. */
  denies?: DenyKeys;
}

/**
 * The keys of the deny list's channel, in the overrides' hash tag (one Cluster slot): the sequence number every
 * change moves on, the denies in force (a hash of the tracker's 1.0 deny key to `<until>[|<reason>]`), the log
 * of changes (a sorted set of those fields by the sequence number of their last change), each deny's end (a
 * sorted set by `until`, store ms), and the marker of the carry-over of 1.0 deny keys (see denies-write.lua).
 */
export interface DenyKeys {
  seq: string;
  denies: string;
  log: string;
  ends: string;
  carryOver: string;
}

/** What a read of the deny channel found: its sequence number, the carry-over's marker, and what changed. */
export interface DenyRead {
  /** The sequence number of the last change ('0' when none). */
  seq: string;
  /** The carry-over's marker: '' when one is due, 'done', or another value while none is due. */
  carryOver: string;
  /**
   * `[field, value]` of every deny in force (`complete`), or of every tracker changed since the known sequence
   * number (a value '' is a deny lifted); some may have ended. Absent when nothing changed.
   */
  changes?: { complete: boolean; entries: Array<[string, string]> };
}

/** One write to the deny channel (see denies-write.lua's header for each operation's values). */
export type DenyWrite =
  | { op: 'deny'; field: string; lengthMs: number; untilMs: number; reason: string }
  | { op: 'allow'; field: string }
  | { op: 'import'; since: string; entries: ReadonlyArray<readonly [string, string]> }
  | { op: 'import-begin'; everyMs: number; liveMs: number }
  | { op: 'import-end'; done: boolean };

/** What a write to the deny channel did: the sequence number after it, the store's clock, a status and two values. */
export interface DenyWriteResult {
  seq: string;
  nowMs: number;
  /** 0 done; for `deny`, 1 `until` not after now and 2 refused (full); for `import-begin`, 1 done already and 2 not due. */
  status: number;
  /** `deny`: the end in force; `import`: denies carried over; `import-begin`: 1.0 instances live. */
  a: number;
  /** `deny`: the reason in force (''); `import`: denies refused (full). */
  b: string;
}

/** The instance a read of the overrides comes from, recorded as live by that read (its heartbeat). */
export interface InstanceHeartbeat {
  /** This instance's id, random per process. */
  id: string;
  /** How long an instance counts as live after its last read, ms. */
  liveMs: number;
}

/** One write to the runtime overrides: a field set to `value`, or removed (`value` undefined). */
export interface OverrideWrite {
  field: string;
  /** The override's JSON; `undefined` removes the field. */
  value: string | undefined;
  /** When it ends, store ms; 0 = never. */
  untilMs: number;
  /** Most overrides kept: a new field beyond it is refused (`'full'`). */
  maxCount: number;
}

/** What a write did: `'past'` when `untilMs` is not after the store's now, `'full'` at `maxCount`; nothing written then. */
export interface OverrideWriteResult {
  /** The set's version after the write. */
  version: string;
  /** The store's clock, ms. */
  nowMs: number;
  status: 'ok' | 'past' | 'full';
}

/** The runtime overrides as read: their version and the store's clock, and every field only when the version moved. */
export interface OverrideRead {
  version: string;
  nowMs: number;
  /** `[field, value]` of every override kept (some may have ended: compare `until` with `nowMs`); absent when unchanged. */
  entries?: Array<[string, string]>;
  /**
   * Instances that read the overrides within the heartbeat's `liveMs`, the reader included; absent when the
   * read carried no heartbeat, or the store is in-process (one instance).
   */
  liveInstances?: number;
  /** The deny channel as read in the same call, when the keys named it (a remote store). */
  denies?: DenyRead;
}

/** `consume` charges when every policy allows; `peek` never charges. */
export type DecisionMode = 'consume' | 'peek';

/**
 * Where counters live. Implementations decide every call of one request atomically (all or nothing).
 */
export interface RateLimitStore {
  /**
   * True when the store decides in this process (the memory store): a deny it holds is answered without a
   * round trip already, so nothing keeps a copy of it in front (see RateLimitDenyList).
   */
  readonly inProcess?: boolean;
  decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision>;
  /**
   * The same decision without a promise, for stores that decide in-process (the memory store): the guard's
   * hot path then allocates no promise at all. Absent, or `undefined`: ask {@link decide}.
   */
  decideSync?(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision | undefined;
  /**
   * A consume of one policy with neither lockout nor lease, decided in-process by the same rules as
   * {@link decideSync} and charged at once when it allows: its verdict on the state under `state.key`, valid
   * until the store's next decision. Absent, or `undefined` (the policy may meet a deny or a lockout): ask
   * {@link decideSync}.
   */
  consumePlain?(state: KeySlot, algorithm: RateLimitAlgorithm, params: AlgorithmParams, cost: number): StoreVerdict | undefined;
  /** Gives back `cost` units per call (count-only-failures), or releases the call's lease (`concurrency`). */
  refund(calls: readonly RateLimitCall[]): Promise<void>;
  /**
   * Charges each call's `cost` whatever its counter says (a penalty), atomically, then reports as a `peek`
   * of one unit per call would (whether one more unit fits, and when). Absent: the store cannot charge without a request.
   */
  penalize?(calls: readonly RateLimitCall[]): Promise<StoreDecision>;
  /**
   * Locks each call's tracker out for `ms` from the store's now, unless a lockout in force ends later (never
   * shortened); an escalating call keeps its offence count, and a call's `token` is kept as the lockout's note.
   */
  block(calls: readonly RateLimitCall[], ms: number): Promise<void>;
  /** Deletes keys: `reset` and `unblock`. */
  delete(keys: readonly string[]): Promise<void>;
  /**
   * Whether a failure of this store means it cannot serve now (an outage: every decision would fail), as
   * opposed to one decision's own failure while the store answers (see `RateLimitStoreError.outage`). Absent:
   * a `RateLimitStoreError` says so itself, and any other failure is an outage.
   */
  isOutage?(error: unknown): boolean;
  /** How long the store and this process took lately (see `StoreTimings`); absent for in-process stores. */
  timings?(): StoreTimings | undefined;
  /** Releases what the store opened. */
  close(): Promise<void>;
  /**
   * Resolves once the store can decide (Redis connected), or after `timeoutMs` at the latest — the app
   * then starts and decides with `onStoreError` until the connection comes up.
   */
  ready?(timeoutMs: number): Promise<boolean>;
  /**
   * Resolves when the store answers (Redis `PING`), rejects otherwise; for health checks, never on the
   * request path. Absent: the store is in-process and always up.
   */
  ping?(): Promise<void>;
  /**
   * Sets or removes one runtime override, drops the ones whose end has passed, and moves the version on,
   * atomically. Absent: the store keeps no overrides (`setOverride` says so).
   */
  writeOverride?(keys: OverrideKeys, write: OverrideWrite): Promise<OverrideWriteResult>;
  /**
   * The overrides' version and the store's clock, with every override when the version is not `knownVersion`;
   * with a `heartbeat`, in the same round trip, records that instance as live and counts the live instances.
   */
  readOverrides?(
    keys: OverrideKeys,
    knownVersion: string | undefined,
    heartbeat?: InstanceHeartbeat,
    knownDenies?: string,
  ): Promise<OverrideRead>;
  /**
   * One write to the deny channel (`keys.denies`), atomic; with the same read, what a remote store's instances
   * share of the deny list. Absent: the store answers denies itself (the memory store).
   */
  writeDenies?(keys: OverrideKeys, write: DenyWrite): Promise<DenyWriteResult>;
  /**
   * Every 1.0 deny key (`<prefix>:{<tracker>}:deny`) on every master, as `[key, value]` batches handed to
   * `each` in turn; false when the client cannot reach every master on its own (a Cluster client without a
   * slot map, such as GLIDE's, or node-redis's).
   */
  scanDenyKeys?(prefix: string, each: (entries: Array<[string, string]>) => Promise<void>): Promise<boolean>;
}
