import { Test } from '@nestjs/testing';
import { RateLimitEvents, RateLimiterService, type RateLimitDecision, type RateLimitPolicy } from '../../lib';
import { RateLimitTestingModule, type RateLimitTestingOptions } from '../../lib/testing';

/** A service on the test clock whose near-limit decisions are recorded as `policy=remaining`. */
async function limiter(options: RateLimitTestingOptions): Promise<{ service: RateLimiterService; near: string[] }> {
  const moduleRef = await Test.createTestingModule({ imports: [RateLimitTestingModule.forRoot(options)] }).compile();
  const near: string[] = [];
  moduleRef.get(RateLimitEvents).subscribe({ nearLimit: (d: RateLimitDecision) => near.push(`${d.policy}=${d.remaining}`) });
  return { service: moduleRef.get(RateLimiterService), near };
}

const hundred: RateLimitPolicy = { name: 'hundred', algorithm: 'fixed-window', limit: 100, window: '1m' };

describe('near-limit decisions', () => {
  it('are those with at most floor(nearLimitRatio × limit) units left, with no float error (0.29 × 100 is 29)', async () => {
    const { service, near } = await limiter({ nearLimitRatio: 0.29 });
    expect((await service.consume(hundred, 'k', { cost: 70 })).remaining).toBe(30);
    expect(near).toEqual([]);
    expect((await service.consume(hundred, 'k')).remaining).toBe(29);
    expect(near).toEqual(['hundred=29']);
  });

  it('with nearLimitRatio 0, only the decision that takes the last unit; a rejection never is one', async () => {
    const { service, near } = await limiter({ nearLimitRatio: 0 });
    const three: RateLimitPolicy = { name: 'three', algorithm: 'sliding-log', limit: 3, window: '1m' };
    const remaining = [];
    for (let i = 0; i < 4; i++) remaining.push((await service.consume(three, 'k')).remaining);
    expect(remaining).toEqual([2, 1, 0, 0]);
    expect(near).toEqual(['three=0']);
  });

  it('are published per policy: of two policies decided together, only the one near its limit', async () => {
    const { service, near } = await limiter({});
    const ten: RateLimitPolicy = { name: 'ten', algorithm: 'gcra', limit: 10, window: '1m' };
    const { allowed, decisions } = await service.consumeAll([hundred, ten], 'k', { cost: 9 });
    expect(allowed).toBe(true);
    expect(decisions.map((d) => d.remaining)).toEqual([91, 1]);
    expect(near).toEqual(['ten=1']);
  });
});

describe('RateLimitEvents.hooks.nearLimit', () => {
  it('is offered only while some listener listens to near-limit decisions', () => {
    const events = new RateLimitEvents({ decision: () => undefined });
    expect(events.hooks.nearLimit).toBeUndefined();
    const stop = events.subscribe({ nearLimit: () => undefined });
    expect(events.hooks.nearLimit).toEqual(expect.any(Function));
    stop();
    expect(events.hooks.nearLimit).toBeUndefined();
    expect(new RateLimitEvents({ nearLimit: () => undefined }).hooks.nearLimit).toEqual(expect.any(Function));
  });

  it("calls the options' hook, then each subscriber, with the policy's decision", () => {
    const calls: string[] = [];
    const events = new RateLimitEvents({ nearLimit: (d) => calls.push(`options:${d.policy}`) });
    events.subscribe({ nearLimit: (d) => calls.push(`a:${d.remaining}`) });
    const decision: RateLimitDecision = {
      allowed: true,
      policy: 'p',
      limit: 10,
      remaining: 1,
      resetMs: 6_000,
      moreQuotaMs: 6_000,
      retryAfterMs: 0,
    };
    events.hooks.nearLimit!(decision);
    expect(calls).toEqual(['options:p', 'a:1']);
  });
});
