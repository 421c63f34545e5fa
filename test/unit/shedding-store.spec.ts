/** SheddingStore's synchronous answer: a remembered rejection needs no promise, anything else is the store's. */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../../lib/rate-limit.engine';
import { SheddingStore } from '../../lib/stores/shedding.store';
import type { RateLimitCall, RateLimitStore, StoreDecision } from '../../lib/stores/store.interface';
import { compilePolicy } from '../../lib/utils/compile-policy';
import { trackerKeyPrefix } from '../../lib/utils/keys';

/** Rejects everything with a 1 s wait, and counts how often it was asked. */
class RejectingStore implements RateLimitStore {
  decides = 0;
  async decide(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    this.decides++;
    const verdicts = calls.map(() => ({
      allowed: false,
      remaining: 0,
      resetMs: 1_000,
      retryAfterMs: 1_000,
      delayMs: 0,
      reason: 0 as const,
    }));
    return { nowMs: 0, allowed: false, verdicts };
  }
  async refund(): Promise<void> {}
  async block(): Promise<void> {}
  async delete(): Promise<void> {}
  async close(): Promise<void> {}
}

function callsFor(tracker: string): RateLimitCall[] {
  const compiled = compilePolicy({ algorithm: 'fixed-window', limit: 1, window: '1h' }, new RateLimitAlgorithmRegistry(), 'test', 'svc');
  return new RateLimitEngine(new RejectingStore()).calls(trackerKeyPrefix('rl', tracker), [
    { compiled, params: compiled.staticParams!, cost: 1 },
  ]);
}

describe('SheddingStore.decideSync', () => {
  it('answers a remembered rejection synchronously, counting its wait down, and leaves the rest to decide', async () => {
    let now = 5_000;
    const inner = new RejectingStore();
    const store = new SheddingStore(inner, 100, () => now);
    const abuser = callsFor('abuser');
    expect(store.decideSync(abuser, 'consume')).toBeUndefined();
    await store.decide(abuser, 'consume');
    now += 400;
    expect(store.decideSync(abuser, 'consume')).toMatchObject({ allowed: false, verdicts: [{ allowed: false, retryAfterMs: 600 }] });
    expect(store.decideSync(callsFor('someone-else'), 'consume')).toBeUndefined();
    now += 600;
    expect(store.decideSync(abuser, 'consume')).toBeUndefined();
    expect(inner.decides).toBe(1);
  });
});
