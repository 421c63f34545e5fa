import { isOutageOf, penalizeIn, pingStore } from '../stores/store-health';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type {
  DecisionMode,
  InstanceHeartbeat,
  OverrideKeys,
  OverrideRead,
  OverrideWrite,
  OverrideWriteResult,
  RateLimitCall,
  RateLimitStore,
  StoreDecision,
  StoreTimings,
} from '../stores/store.interface';

/** What a layer learns of the answers to its decisions without a promise of its own (see {@link StoreLayer.decideSeen}). */
export interface AnswerWatcher {
  /** The answer to `calls` (the store's, or a fallback's), before the decision's promise settles with it. */
  seen(calls: readonly RateLimitCall[], decision: StoreDecision): void;
}

/** An outage as a log line names it (`Redis at 10.0.0.5:6379 is not reachable: …`), and what decisions do meanwhile. */
export interface OutageDescription {
  what: string;
  meanwhile: string;
}

/**
 * A layer of the decision pipeline: a store in front of another, `inner`, to which it passes every call it does
 * not change. A layer overrides only what it changes (see create-store.ts for the order they are stacked in),
 * so what each one adds is all its class holds.
 */
export abstract class StoreLayer implements RateLimitStore {
  constructor(protected readonly inner: RateLimitStore) {}

  get inProcess(): boolean | undefined {
    return this.inner.inProcess;
  }

  decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    return this.inner.decide(calls, mode);
  }

  /**
   * {@link decide}, with `watcher` told the answer before the promise settles with it: a layer that only needs
   * to see answers asks this of its inner store instead of chaining a promise of its own on every decision. A
   * layer that passes the calls down unchanged hands the watcher down too, so that the layer that settles the
   * decision's promise (the resilient one) tells it, with no promise in between; any other chains one here.
   */
  decideSeen(calls: readonly RateLimitCall[], mode: DecisionMode, watcher: AnswerWatcher): Promise<StoreDecision> {
    return seeing(this.decide(calls, mode), calls, watcher);
  }

  decideSync(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision | undefined {
    return this.inner.decideSync?.(calls, mode);
  }

  refund(calls: readonly RateLimitCall[]): Promise<void> {
    return this.inner.refund(calls);
  }

  penalize(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    return penalizeIn(this.inner, calls);
  }

  block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    return this.inner.block(calls, ms);
  }

  delete(keys: readonly string[]): Promise<void> {
    return this.inner.delete(keys);
  }

  isOutage(error: unknown): boolean {
    return isOutageOf(this.inner, error);
  }

  timings(): StoreTimings | undefined {
    return this.inner.timings?.();
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  ready(timeoutMs: number): Promise<boolean> {
    return this.inner.ready?.(timeoutMs) ?? Promise.resolve(true);
  }

  ping(): Promise<void> {
    return pingStore(this.inner);
  }

  /**
   * The outage behind `error` (a failure of a call through this layer) as the resilient layer words it; undefined
   * when no layer below knows, or the failure is no outage.
   */
  describeOutage(error: unknown): OutageDescription | undefined {
    return this.inner instanceof StoreLayer ? this.inner.describeOutage(error) : undefined;
  }

  /** Straight to the store: no deadline, circuit or fallback (an administrative call, not a decision). */
  writeOverride(keys: OverrideKeys, write: OverrideWrite): Promise<OverrideWriteResult> {
    return this.inner.writeOverride ? this.inner.writeOverride(keys, write) : Promise.reject(noOverrides());
  }

  readOverrides(
    keys: OverrideKeys,
    knownVersion: string | undefined,
    heartbeat?: InstanceHeartbeat,
    knownDenies?: string,
  ): Promise<OverrideRead> {
    return this.inner.readOverrides ? this.inner.readOverrides(keys, knownVersion, heartbeat, knownDenies) : Promise.reject(noOverrides());
  }

  get writeDenies(): RateLimitStore['writeDenies'] {
    return this.inner.writeDenies?.bind(this.inner);
  }

  get scanDenyKeys(): RateLimitStore['scanDenyKeys'] {
    return this.inner.scanDenyKeys?.bind(this.inner);
  }
}

function noOverrides(): RateLimitConfigError {
  return new RateLimitConfigError('setOverride: this rate-limit store keeps no runtime overrides (the memory and Redis stores do).');
}

/** `store.decide`, `watcher` told the answer: with no promise of its own when the store is a layer. */
export function decideSeen(
  store: RateLimitStore,
  calls: readonly RateLimitCall[],
  mode: DecisionMode,
  watcher: AnswerWatcher,
): Promise<StoreDecision> {
  return store instanceof StoreLayer ? store.decideSeen(calls, mode, watcher) : seeing(store.decide(calls, mode), calls, watcher);
}

/** `decision`, `watcher` told its answer in a `then` of its own. */
export function seeing(decision: Promise<StoreDecision>, calls: readonly RateLimitCall[], watcher: AnswerWatcher): Promise<StoreDecision> {
  return decision.then((answer) => {
    watcher.seen(calls, answer);
    return answer;
  });
}
