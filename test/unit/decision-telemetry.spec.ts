import type { RateLimitDecision, RateLimitDecisionEvent, RateLimitStoreErrorMode } from '../../lib';
import { policyOutcome, requestVerdict } from '../../lib/events/decision-telemetry';

const decision = (policy: string, allowed: boolean, extra: Partial<RateLimitDecision> = {}): RateLimitDecision => ({
  allowed,
  policy,
  limit: 10,
  remaining: allowed ? 5 : 0,
  resetMs: 60_000,
  moreQuotaMs: 6_000,
  retryAfterMs: allowed ? 0 : 6_000,
  ...extra,
});

const event = (allowed: boolean, decisions: RateLimitDecision[], fallbacks?: RateLimitStoreErrorMode[]): RateLimitDecisionEvent => ({
  allowed,
  decisions,
  durationMs: 1,
  ...(fallbacks ? { fallbacks } : {}),
});

const down = { reason: 'store-unavailable' } as const;

describe('policyOutcome', () => {
  it('names who decided each policy: its counter, shadow mode, or which fallback', () => {
    const e = event(
      false,
      [
        decision('a', true),
        decision('b', false),
        decision('c', false, { reason: 'blocked' }),
        decision('d', false, { reason: 'shadow' }),
        decision('e', true, down),
        decision('f', false, down),
        decision('g', true, down),
        decision('h', false, down),
      ],
      ['fail-open', 'fail-open', 'fail-open', 'fail-open', 'fail-open', 'fail-closed', 'insurance', 'insurance'],
    );
    expect(e.decisions.map((_, i) => policyOutcome(e, i))).toEqual([
      'allowed',
      'rejected',
      'rejected',
      'shadow-rejected',
      'fail-open',
      'fail-closed',
      'insurance-allowed',
      'insurance-rejected',
    ]);
  });

  it('reads a fallback decision without fallbacks by its verdict', () => {
    const e = event(false, [decision('a', true, down), decision('b', false, down)]);
    expect([policyOutcome(e, 0), policyOutcome(e, 1)]).toEqual(['fail-open', 'fail-closed']);
  });
});

describe('requestVerdict', () => {
  it('rejected: the enforced rejection with the longest wait, never a shadow one', () => {
    const long = decision('long', false, { retryAfterMs: 9_000 });
    const e = event(false, [
      decision('short', false, { retryAfterMs: 1_000 }),
      decision('shadow', false, { reason: 'shadow', retryAfterMs: 50_000 }),
      long,
      decision('ok', true),
    ]);
    expect(requestVerdict(e)).toEqual({ outcome: 'rejected', decision: long });
  });

  it('allowed: a fallback decision first, then a shadow rejection, then the fewest units left', () => {
    const insured = decision('insured', true, down);
    const withFallback = event(true, [decision('ok', true), insured], ['fail-open', 'insurance']);
    expect(requestVerdict(withFallback)).toEqual({ outcome: 'insurance-allowed', decision: insured });

    const shadow = decision('shadow', false, { reason: 'shadow' });
    expect(requestVerdict(event(true, [decision('ok', true, { remaining: 0 }), shadow]))).toEqual({
      outcome: 'shadow-rejected',
      decision: shadow,
    });

    const low = decision('low', true, { remaining: 1 });
    expect(requestVerdict(event(true, [decision('high', true, { remaining: 8 }), low]))).toEqual({ outcome: 'allowed', decision: low });
  });

  it('one policy: its own outcome', () => {
    const closed = decision('closed', false, down);
    expect(requestVerdict(event(false, [closed], ['fail-closed']))).toEqual({ outcome: 'fail-closed', decision: closed });
  });
});
