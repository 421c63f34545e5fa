import type { AlgorithmParams, AlgorithmVerdict, RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import type {
  DecisionMode,
  KeySlot,
  OverrideRead,
  OverrideWrite,
  OverrideWriteResult,
  RateLimitCall,
  RateLimitStore,
  StoreDecision,
  StoreVerdict,
} from '../store.interface';
import { MemoryKeyspace } from './memory-keyspace';
import { emptyVerdict, MemoryRules, paramsAt, type PolicyCall } from './memory-rules';

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
  /** Each key's value and expiry, bounded by `maxKeys`. */
  private readonly keyspace: MemoryKeyspace;
  /** What decides each policy: the one place of the deny, lockout, capacity and `blockFor` rules. */
  private readonly rules: MemoryRules;
  /** The injected clock; undefined: `Date.now`, called as itself (through a field, the call is not inlined). */
  private readonly clock: RateLimitClock | undefined;
  /** The algorithm verdict of a single-policy decision waiting to be committed (no array per decision). */
  private readonly single: Array<AlgorithmVerdict<unknown> | undefined> = [undefined];
  /** The call {@link consumePlain} decides, its fields set per decision (no object per decision). */
  private readonly plainCall: PolicyCall = {
    algorithm: undefined!,
    params: undefined!,
    cost: 0,
    hold: 0,
    blockForMs: 0,
    escalate: undefined,
    stateKey: '',
    stateSlot: undefined,
    blockKey: '',
    token: '',
  };
  /** The verdict {@link consumePlain} answers with, valid until the store's next decision. */
  private readonly plainVerdict: StoreVerdict = emptyVerdict();
  /** Runtime overrides by field (see {@link writeOverride}), apart from the counters: `maxKeys` never evicts them. */
  private readonly overrides = new Map<string, { value: string; untilMs: number }>();
  /** Moves on with every write to {@link overrides}. */
  private overridesVersion = 0;
  /** Overrides with an end: the sweep of a write looks for ended ones only while there are some. */
  private endingOverrides = 0;

  constructor(options: MemoryStoreOptions = {}) {
    this.keyspace = new MemoryKeyspace(options.maxKeys ?? 100_000);
    this.rules = new MemoryRules(this.keyspace);
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
    const denied = this.rules.denied(calls, now);
    if (denied) return denied;
    const verdicts = new Array<StoreVerdict>(calls.length);
    const charges = calls.length === 1 ? this.single : new Array<AlgorithmVerdict<unknown> | undefined>(calls.length);
    let allowed = true;
    for (let i = 0; i < calls.length; i++) {
      const verdict = (verdicts[i] = emptyVerdict());
      charges[i] = this.rules.decide(calls[i], mode, now, verdict);
      if (!verdict.allowed) allowed = false;
    }
    if (mode === 'consume' && allowed) {
      for (let i = 0; i < calls.length; i++) {
        const charge = charges[i];
        if (charge) this.keyspace.writeState(calls[i].stateKey, calls[i].stateSlot, charge.next, charge.ttlMs, now);
      }
    } else this.reportUncharged(calls, verdicts, now);
    charges[0] = undefined;
    return { nowMs: now, allowed, verdicts };
  }

  /**
   * What {@link decideSync} decides for a consume of one policy with neither lockout nor lease, without a
   * call, a decision or a verdict array (see {@link RateLimitStore.consumePlain}): the same rules, on the
   * state slot the caller keeps. Its verdict is valid until the store's next decision; `undefined` once a deny
   * or a lockout was ever written (the caller has no deny or lockout key to read).
   */
  consumePlain(state: KeySlot, algorithm: RateLimitAlgorithm, params: AlgorithmParams, cost: number): StoreVerdict | undefined {
    const rules = this.rules;
    if (rules.hasDenials || rules.hasLockouts) return undefined;
    const now = this.now();
    const call = this.plainCall;
    call.algorithm = algorithm;
    call.params = params;
    call.cost = cost;
    call.stateKey = state.key;
    call.stateSlot = state;
    const charge = rules.decide(call, 'consume', now, this.plainVerdict);
    if (charge) this.keyspace.writeState(state.key, state, charge.next, charge.ttlMs, now);
    return this.plainVerdict;
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
    for (const call of calls) this.rules.block(call, ms, now);
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
