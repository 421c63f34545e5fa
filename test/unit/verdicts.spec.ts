/** One verdict vocabulary: the scripts' codes, the codec's reading of them and the public reasons, from one table. */
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { parseDecision } from '../../lib/stores/redis/redis-codec';
import { composeDecideScript, composeOnePolicyScript } from '../../lib/stores/redis/redis-scripts';
import type { StoreVerdict } from '../../lib/stores/store.interface';
import { Verdict } from '../../lib/stores/verdicts';

const registry = new RateLimitAlgorithmRegistry();

describe('Verdict', () => {
  it('every composed script defines each code under its VERDICT_* name, and writes no status by number', () => {
    const scripts = [composeDecideScript(registry.all()), ...registry.all().map((a) => composeOnePolicyScript(a))];
    for (const lua of scripts) {
      expect(lua).toContain(
        'local VERDICT_ALLOWED = 0\nlocal VERDICT_LIMITED = 1\nlocal VERDICT_BLOCKED = 2\nlocal VERDICT_COST_EXCEEDS_CAPACITY = 3\n' +
          'local VERDICT_STORE_UNAVAILABLE = 4\nlocal VERDICT_DENIED = 5\nlocal VERDICT_RESERVED = 6',
      );
      expect(lua).not.toContain('--@');
      // A decision's first reply slot is assigned a name, never a literal (`reply[o], … = 0, …`).
      expect(lua).not.toMatch(/reply\[[bo]\], reply\[[bo] \+ 1\][^=]*= \d/);
    }
  });

  it('the codec reads a reply status as the code of the same name (no script replies a deny: the deny list answers it)', () => {
    const reply = [1_000, ...[0, 1, 2, 3, 6].flatMap((status) => [status, 0, 10, 10, 0, 10])];
    const { verdicts, allowed } = parseDecision(reply, 1, 5);
    expect(allowed).toBe(false);
    expect(verdicts.map((v) => [v.allowed, v.reason, v.note])).toEqual([
      [true, Verdict.Allowed, undefined],
      [false, Verdict.Limited, undefined],
      [false, Verdict.Blocked, undefined],
      [false, Verdict.CostExceedsCapacity, undefined],
      [false, Verdict.Reserved, undefined],
    ]);
  });

  it('the engine reports each code as its public reason (a deny as a lockout; the counter as none; a reserve as reserved)', () => {
    const compiled = compilePolicy({ algorithm: 'fixed-window', limit: 5, window: '1m' }, registry, 'test', 'svc');
    const engine = new RateLimitEngine(new MemoryStore());
    const reasons = Object.values(Verdict).map((reason) => {
      const verdict: StoreVerdict = { allowed: false, remaining: 0, resetMs: 1, retryAfterMs: 1, delayMs: 0, moreQuotaMs: 1, reason };
      return engine.toDecisions([{ compiled, params: compiled.staticParams!, cost: 1 }], [verdict])[0].reason;
    });
    expect(reasons).toEqual([undefined, undefined, 'blocked', 'cost-exceeds-capacity', 'store-unavailable', 'blocked', 'reserved']);
  });
});
