import { isOutageOf, penalizeIn, pingStore } from '../stores/store-health';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type {
  DecisionMode,
  OverrideKeys,
  OverrideRead,
  OverrideWrite,
  OverrideWriteResult,
  RateLimitCall,
  RateLimitStore,
  StoreDecision,
  StoreTimings,
} from '../stores/store.interface';

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

  /** Straight to the store: no deadline, circuit or fallback (an administrative call, not a decision). */
  writeOverride(keys: OverrideKeys, write: OverrideWrite): Promise<OverrideWriteResult> {
    return this.inner.writeOverride ? this.inner.writeOverride(keys, write) : Promise.reject(noOverrides());
  }

  readOverrides(keys: OverrideKeys, knownVersion: string | undefined): Promise<OverrideRead> {
    return this.inner.readOverrides ? this.inner.readOverrides(keys, knownVersion) : Promise.reject(noOverrides());
  }
}

function noOverrides(): RateLimitConfigError {
  return new RateLimitConfigError('setOverride: this rate-limit store keeps no runtime overrides (the memory and Redis stores do).');
}
