import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { AcquireTurn } from './acquire-turns';

/** One call waiting in a queue: its turn, its deadline, and how to settle it. */
export interface Waiter {
  readonly turn: AcquireTurn;
  /** `performance.now()` past which the call must not still be waiting. */
  readonly deadline: number;
  readonly maxWaitMs: number;
  readonly signal: AbortSignal | undefined;
  readonly resolve: (decision: RateLimitDecision) => void;
  readonly reject: (error: Error) => void;
  /** Its signal's listener (none without a signal). */
  onAbort: (() => void) | undefined;
  /** The head's store call is in flight: abort and shutdown wait for its answer, which may have taken quota. */
  asking: boolean;
  /** In its queue's line (see {@link WaiterLine}). */
  inLine: boolean;
}

/**
 * The calls of one queue in order, with what a joining call needs kept as running totals: how many wait and
 * the sum of their costs, so a join tells its soonest start in O(1) however long the line. The head leaves by
 * moving an index (no `Array.shift` over thousands of calls); a call in the middle (an abort) by a flag, its
 * slot skipped when the index reaches it. Empty slots are swept out once they outnumber the calls, so every
 * removal costs O(1) amortized.
 */
export class WaiterLine {
  private slots: Waiter[] = [];
  /** Index of the head: the slots before it are empty, the one at it is not (unless the line is). */
  private first = 0;
  /** Calls in line. */
  size = 0;
  /** The sum of their costs. */
  units = 0;
  /** Calls in line with a finite deadline: while there are none, no call can be past its deadline. */
  bounded = 0;

  /** The call at the front of the line (undefined when the line is empty). */
  get head(): Waiter | undefined {
    return this.slots[this.first];
  }

  /** Puts `waiter` at the back of the line. */
  push(waiter: Waiter): void {
    waiter.inLine = true;
    this.slots.push(waiter);
    this.count(waiter, 1);
  }

  /** Takes `waiter` out of line, wherever it stands (nothing when it is not in line). */
  remove(waiter: Waiter): void {
    if (!waiter.inLine) return;
    waiter.inLine = false;
    this.count(waiter, -1);
    const { slots } = this;
    while (this.first < slots.length && !slots[this.first].inLine) this.first++;
    if (this.first === slots.length) {
      this.slots = [];
      this.first = 0;
    } else if (slots.length - this.size > Math.max(this.size, 32)) {
      this.retain(() => true);
    }
  }

  /**
   * Keeps, in order, the calls for which `keep` (told how many calls it kept before this one) returns true,
   * and takes the others out of line. O(n): for what visits every call anyway (a prune, shutdown).
   */
  retain(keep: (waiter: Waiter, ahead: number) => boolean): void {
    const kept: Waiter[] = [];
    for (let i = this.first; i < this.slots.length; i++) {
      const waiter = this.slots[i];
      if (!waiter.inLine) continue;
      if (keep(waiter, kept.length)) kept.push(waiter);
      else {
        waiter.inLine = false;
        this.count(waiter, -1);
      }
    }
    this.slots = kept;
    this.first = 0;
  }

  private count(waiter: Waiter, sign: 1 | -1): void {
    this.size += sign;
    this.units += sign * waiter.turn.cost;
    if (Number.isFinite(waiter.deadline)) this.bounded += sign;
  }
}

/** Removes a call's abort listener, when it has one. */
export function unlisten(waiter: Waiter): void {
  if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
}
