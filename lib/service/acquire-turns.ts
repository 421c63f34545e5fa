import type { CompiledPolicy } from '../policy/compile-policy';
import { StringMemo } from '../shared/string-memo';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { WaitPace } from './wait-outlook';

/** One `acquire()` call: how to take its quota, and what to call it in messages. */
export interface AcquireTurn {
  /** The counter: calls with the same queue key wait in one queue. */
  queueKey: string;
  key: string;
  policy: string;
  cost: number;
  pace: WaitPace;
  /** One store decision that takes the quota when it allows; `giveBack` returns what it took. */
  take(): Promise<{ decision: RateLimitDecision; giveBack(): Promise<void> }>;
}

/** Most keys whose turn one policy remembers: outbound keys (partners, tenants) are few. */
const MAX_KEYS_PER_POLICY = 1_000;

/** One key's remembered turn under one policy: its last cost's (see {@link AcquireTurns}). */
interface TurnSlot {
  /** The key as the memo holds it (its own copy). */
  readonly key: string;
  turn: AcquireTurn | undefined;
}

/**
 * The turn of recent `acquire()` calls, by compiled policy, key and cost. A turn holds nothing of one call
 * (the counter's key, the pace, the store call that takes the quota), so the calls of a burst on one
 * policy + key share one, where building it per call (its request, the store call's fields, its pace, its
 * closure) was most of what a call refused at once cost.
 *
 * Bounded: per policy (held weakly, so it goes with its compiled policy) a {@link StringMemo} of at most
 * {@link MAX_KEYS_PER_POLICY} keys, each with the turn of the last cost asked (another cost builds anew).
 */
export class AcquireTurns {
  private readonly byPolicy = new WeakMap<CompiledPolicy, StringMemo<TurnSlot>>();

  /** `make` builds the turn of `key` (checked: a non-empty string) under `compiled` for `cost` units. */
  constructor(private readonly make: (compiled: CompiledPolicy, key: string, cost: number) => AcquireTurn) {}

  get(compiled: CompiledPolicy, key: string, cost: number): AcquireTurn {
    let slots = this.byPolicy.get(compiled);
    if (slots === undefined) {
      slots = new StringMemo((own): TurnSlot => ({ key: own, turn: undefined }), MAX_KEYS_PER_POLICY);
      this.byPolicy.set(compiled, slots);
    }
    const slot = slots.get(key);
    let turn = slot.turn;
    if (turn === undefined || turn.cost !== cost) slot.turn = turn = this.make(compiled, slot.key, cost);
    return turn;
  }
}
