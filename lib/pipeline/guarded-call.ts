import type { DecisionMode, RateLimitCall, StoreDecision } from '../stores/store.interface';
import type { AnswerWatcher } from './store-layer';

/** A call under a deadline: the promise its caller holds, and what answers it when the store does not. */
export interface Guarded {
  resolve(value: unknown): void;
  reject(error: unknown): void;
  /**
   * Answers in the store's place once the call failed (a decision's fallback, nothing for a refund), the
   * failure counting against the circuit of `shard`; without it, the caller gets the error and no circuit hears.
   */
  recover: ((calls: readonly RateLimitCall[], mode: DecisionMode) => unknown) | undefined;
  calls: readonly RateLimitCall[];
  mode: DecisionMode;
  key: string | undefined;
  shard: string | undefined;
  /** A layer above that sees the answer before the promise settles with it (see {@link StoreLayer.decideSeen}). */
  seen: AnswerWatcher | undefined;
}

/** A refund or release that failed answers nothing: it only errs on the strict side. */
export const answerNothing = (): undefined => undefined;

/** The context of a call under a deadline; its settlers are set with its promise (see ResilientStore.guard). */
export function guarded(
  recover: Guarded['recover'],
  calls: readonly RateLimitCall[],
  mode: DecisionMode,
  key: string | undefined,
  shard: string | undefined,
  seen: AnswerWatcher | undefined,
): Guarded {
  return { resolve: settleLater, reject: settleLater, recover, calls, mode, key, shard, seen };
}

/** Placeholder of a {@link Guarded} call's settlers until its promise's executor (run at once) sets them. */
function settleLater(): void {}

/** The context of a call no fallback answers (an operator call, a ping): its caller gets the failure. */
export function unrecovered(): Guarded {
  return guarded(undefined, [], 'consume', undefined, undefined, undefined);
}

/** Resolves `call` with its answer, told first to the layer above that watches it (which failing rejects it, as in a `then`). */
export function settle(call: Guarded, answer: unknown): void {
  if (call.seen) {
    try {
      call.seen.seen(call.calls, answer as StoreDecision);
    } catch (failure) {
      return call.reject(failure);
    }
  }
  call.resolve(answer);
}
