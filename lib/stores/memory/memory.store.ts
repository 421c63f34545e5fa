import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import { deniedDecision, extendedLockout, lockoutNote, lockoutUntil, newLockout, type LockoutValue } from '../lockouts';
import type {
  DecisionMode,
  KeySlot,
  OverrideRead,
  OverrideWrite,
  OverrideWriteResult,
  RateLimitCall,
  RateLimitStore,
  StateSlot,
  StoreDecision,
  StoreVerdict,
} from '../store.interface';
import { Verdict } from '../verdicts';
import { MemoryKeyspace } from './memory-keyspace';

/** A source of time in milliseconds; tests inject a fake one. */
export type RateLimitClock = () => number;

/** Options of the in-process store. */
export interface MemoryStoreOptions {
  /**
   * Most trackers' states kept at once; past it, the least recently used are evicted (their quota
   * restarts full), so a flood of distinct keys cannot grow memory without bound.
   * @default 100_000
   */
  maxKeys?: number;
  /** Time source in ms. @default Date.now */
  clock?: RateLimitClock;
}

/**
 * The in-process store: runs each algorithm's TypeScript twin with exactly the steps the Lua dispatcher
 * (`algorithms/decide.lua`) takes, so it decides as Redis would. One process only: instances do not share it.
 */
export class MemoryStore implements RateLimitStore {
  /** Decides in this process: its deny entries need no copy in front of it. */
  readonly inProcess = true;
  /** Set by the first deny written: until then no decision reads a deny key (the usual store has none). */
  private hasDenials = false;
  /** Set by the first lockout written (`blockFor`, `block()`): until then no decision reads a lockout key. */
  private hasLockouts = false;
  /** Each key's value and expiry, bounded by `maxKeys`. */
  private readonly keyspace: MemoryKeyspace;
  /** The injected clock; undefined: `Date.now`, called as itself (through a field, the call is not inlined). */
  private readonly clock: RateLimitClock | undefined;
  /** The algorithm verdict of a single-policy decision waiting to be committed (no array per decision). */
  private readonly single: Array<AlgorithmVerdict<unknown> | undefined> = [undefined];
  /** Runtime overrides by field (see {@link writeOverride}), apart from the counters: `maxKeys` never evicts them. */
  private readonly overrides = new Map<string, { value: string; untilMs: number }>();
  /** Moves on with every write to {@link overrides}. */
  private overridesVersion = 0;
  /** Overrides with an end: the sweep of a write looks for ended ones only while there are some. */
  private endingOverrides = 0;

  constructor(options: MemoryStoreOptions = {}) {
    this.keyspace = new MemoryKeyspace(options.maxKeys ?? 100_000);
    this.clock = options.clock;
  }

  /** Number of keys held, for tests and metrics. */
  get size(): number {
    return this.keyspace.size;
  }

  /** The store's clock in whole ms: the time its decisions are made at (calendar windows are computed at it). */
  now(): number {
    const clock = this.clock;
    return clock === undefined ? Date.now() : Math.floor(clock());
  }

  async decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    return this.decideSync(calls, mode);
  }

  /** The decision, synchronously (see {@link RateLimitStore.decideSync}). */
  decideSync(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision {
    const now = this.now();
    if (this.hasDenials) {
      const denied = this.denied(calls, now);
      if (denied) return denied;
    }
    const verdicts = new Array<StoreVerdict>(calls.length);
    const charges = calls.length === 1 ? this.single : new Array<AlgorithmVerdict<unknown> | undefined>(calls.length);
    charges[0] = undefined;
    let allowed = true;
    for (let i = 0; i < calls.length; i++) {
      const verdict = (verdicts[i] = this.check(calls[i], now, mode, charges, i));
      if (!verdict.allowed) allowed = false;
    }
    if (mode === 'consume' && allowed) {
      for (let i = 0; i < calls.length; i++) {
        const charge = charges[i];
        if (charge) this.keyspace.writeState(calls[i].stateKey, calls[i].stateSlot, charge.next, charge.ttlMs, now);
      }
    } else this.reportUncharged(calls, verdicts, now);
    return { nowMs: now, allowed, verdicts };
  }

  /**
   * What {@link decideSync} decides for a consume of one policy that needs nothing but its counter, without a
   * call, a decision or a verdict to copy (see {@link RateLimitStore.consumePlain}): `undefined` once a deny or
   * a lockout was ever written, or when the cost exceeds the capacity.
   */
  consumePlain(
    state: KeySlot,
    algorithm: RateLimitAlgorithm,
    params: AlgorithmParams,
    cost: number,
  ): AlgorithmVerdict<unknown> | undefined {
    if (this.hasDenials || this.hasLockouts) return undefined;
    const now = this.now();
    const at = paramsAt(params, now);
    if (cost > (algorithm.usesBurst ? at.burst : at.limit)) return undefined;
    const v = this.verdict(state.key, state, algorithm, at, cost, '', now);
    if (v.allowed) this.keyspace.writeState(state.key, state, v.next, v.ttlMs, now);
    return v;
  }

  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    const now = this.now();
    for (const call of calls) this.change(call, call.cost, now);
  }

  /** Gives back `cost` units of `call` (a negative cost charges them: a penalty), as the algorithm's refund says. */
  private change(call: RateLimitCall, cost: number, now: number): void {
    const refund = call.algorithm.refund(this.keyspace.read(call.stateKey, now), paramsAt(call.params, now), cost, now, call.token);
    if (refund) this.keyspace.write(call.stateKey, refund.next, refund.ttlMs, now);
  }

  async penalize(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    const now = this.now();
    for (const call of calls) this.change(call, -call.cost, now);
    // As decide.lua: report what a peek of one unit sees after the charge.
    return this.decideSync(
      calls.map((call) => ({ ...call, cost: 1 })),
      'peek',
    );
  }

  async block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    const now = this.now();
    this.hasLockouts = true;
    for (const call of calls) {
      if (call.blockKey === call.denyKey) this.hasDenials = true;
      const next = extendedLockout(this.keyspace.read(call.blockKey, now) as LockoutValue | undefined, now, ms, call.escalate, call.token);
      if (next) this.keyspace.write(call.blockKey, next.value, next.ttlMs, now);
    }
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) {
      this.keyspace.delete(key);
    }
  }

  async close(): Promise<void> {
    this.keyspace.clear();
  }

  /** As the Redis store's override-write script: ended overrides dropped, then the write, then a new version. */
  async writeOverride(_keys: unknown, { field, value, untilMs, maxCount }: OverrideWrite): Promise<OverrideWriteResult> {
    const now = this.now();
    this.dropEndedOverrides(now);
    let status: OverrideWriteResult['status'] = 'ok';
    if (value === undefined) this.setOverride(field, undefined);
    else if (untilMs > 0 && untilMs <= now) status = 'past';
    else if (!this.overrides.has(field) && this.overrides.size >= maxCount) status = 'full';
    else this.setOverride(field, { value, untilMs });
    if (status === 'ok') this.overridesVersion++;
    return { version: String(this.overridesVersion), nowMs: now, status };
  }

  async readOverrides(_keys: unknown, knownVersion: string | undefined): Promise<OverrideRead> {
    const version = String(this.overridesVersion);
    const nowMs = this.now();
    if (version === knownVersion) return { version, nowMs };
    return { version, nowMs, entries: [...this.overrides].map(([field, { value }]) => [field, value]) };
  }

  private setOverride(field: string, entry: { value: string; untilMs: number } | undefined): void {
    if (this.overrides.get(field)?.untilMs) this.endingOverrides--;
    if (entry === undefined) this.overrides.delete(field);
    else this.overrides.set(field, entry);
    if (entry?.untilMs) this.endingOverrides++;
  }

  private dropEndedOverrides(now: number): void {
    if (this.endingOverrides === 0) return;
    for (const [field, { untilMs }] of this.overrides) if (untilMs > 0 && untilMs <= now) this.setOverride(field, undefined);
  }

  /**
   * As decide.lua: every policy rejected when the decision's tracker is denied. Read with `touch`, so a denied
   * tracker that keeps calling is the last its `maxKeys` bound evicts.
   */
  private denied(calls: readonly RateLimitCall[], now: number): StoreDecision | undefined {
    const denyKey = calls[0]?.denyKey;
    if (denyKey === undefined) return undefined;
    const denial = this.keyspace.read(denyKey, now, true) as LockoutValue | undefined;
    if (denial === undefined || lockoutUntil(denial) <= now) return undefined;
    return deniedDecision(calls.length, lockoutUntil(denial) - now, now, lockoutNote(denial));
  }

  /** Checks call `i`; `charges[i]` gets its algorithm verdict to commit when allowed (stays empty otherwise). */
  private check(
    call: RateLimitCall,
    now: number,
    mode: DecisionMode,
    charges: Array<AlgorithmVerdict<unknown> | undefined>,
    i: number,
  ): StoreVerdict {
    const lockout = this.hasLockouts ? (this.keyspace.read(call.blockKey, now) as LockoutValue | undefined) : undefined;
    const until = lockout === undefined ? undefined : lockoutUntil(lockout);
    if (until !== undefined && until > now) {
      const left = until - now;
      return { allowed: false, remaining: 0, resetMs: left, retryAfterMs: left, delayMs: 0, moreQuotaMs: left, reason: Verdict.Blocked };
    }
    const { algorithm, cost, hold = 0 } = call;
    const params = paramsAt(call.params, now);
    const capacity = algorithm.usesBurst ? params.burst : params.limit;
    // A reserve, as decide-one.lua: checked with the units held back, charged the cost alone.
    let v = this.verdict(call.stateKey, call.stateSlot, algorithm, params, cost + hold, call.token, now);
    let reserved = false;
    if (hold > 0 && cost + hold <= capacity) {
      const plain = this.verdict(call.stateKey, call.stateSlot, algorithm, params, cost, call.token, now);
      if (v.allowed) v = plain;
      else reserved = plain.allowed;
    }
    const verdict: StoreVerdict = {
      allowed: v.allowed,
      remaining: hold > 0 ? Math.max(v.remaining - hold, 0) : v.remaining,
      resetMs: v.resetMs,
      retryAfterMs: v.retryAfterMs,
      delayMs: v.delayMs,
      moreQuotaMs: v.moreQuotaMs,
      reason: v.allowed ? Verdict.Allowed : reserved ? Verdict.Reserved : Verdict.Limited,
    };
    if (cost + hold > capacity) {
      return { ...verdict, allowed: false, retryAfterMs: -1, reason: Verdict.CostExceedsCapacity };
    }
    if (!v.allowed && !reserved && call.blockForMs > 0 && mode === 'consume') {
      const { lengthMs, value, ttlMs } = newLockout(call.blockForMs, call.escalate, lockout, now);
      this.hasLockouts = true;
      this.keyspace.write(call.blockKey, value, ttlMs, now);
      verdict.retryAfterMs = Math.max(verdict.retryAfterMs, lengthMs);
      verdict.resetMs = Math.max(verdict.resetMs, lengthMs);
      verdict.moreQuotaMs = Math.max(verdict.moreQuotaMs, lengthMs);
      verdict.reason = Verdict.Blocked;
    }
    if (v.allowed) charges[i] = v;
    return verdict;
  }

  /** The algorithm's verdict on the state under `key`, whose rewrite for changed params (if any) is stored whatever the outcome. */
  private verdict(
    key: string,
    slot: StateSlot | undefined,
    algorithm: RateLimitAlgorithm,
    params: AlgorithmParams,
    cost: number,
    token: string,
    now: number,
  ): AlgorithmVerdict<unknown> {
    const v = algorithm.check(this.keyspace.readState(key, slot, now), params, cost, now, token);
    if (v.rewrite) this.keyspace.writeState(key, slot, v.rewrite.next, v.rewrite.ttlMs, now);
    return v;
  }

  /** As decide.lua: when nothing was charged, policies that allowed report their quota as it stands. */
  private reportUncharged(calls: readonly RateLimitCall[], verdicts: StoreVerdict[], now: number): void {
    calls.forEach((call, i) => {
      if (!verdicts[i].allowed) return;
      const v = call.algorithm.check(this.keyspace.read(call.stateKey, now), paramsAt(call.params, now), 0, now, call.token);
      const remaining = call.hold ? Math.max(v.remaining - call.hold, 0) : v.remaining;
      verdicts[i] = { ...verdicts[i], remaining, resetMs: v.resetMs, delayMs: 0, moreQuotaMs: v.moreQuotaMs };
    });
  }
}

/**
 * `params` for a decision at `now`. A calendar window's periods computed on another clock than this store's
 * (a `RateLimiterService` call under a test clock) are recomputed around this store's now: its clock is the
 * only one its decisions read, so, unlike Redis, it is never a period away from them.
 */
function paramsAt(params: AlgorithmParams, now: number): AlgorithmParams {
  const { periods } = params;
  return periods === undefined || periods.holds(now) ? params : periods.around(now).params(params.limit, params.burst);
}
