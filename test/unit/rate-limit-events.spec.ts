import { Logger } from '@nestjs/common';
import { RateLimitEvents, type RateLimitDecisionEvent } from '../../lib';

const event = (allowed: boolean): RateLimitDecisionEvent => ({
  allowed,
  decisions: [
    { allowed, policy: 'default', limit: 1, remaining: 0, resetMs: 1_000, moreQuotaMs: 1_000, retryAfterMs: allowed ? 0 : 1_000 },
  ],
  durationMs: 0.5,
});

describe('RateLimitEvents', () => {
  afterEach(() => jest.restoreAllMocks());

  it("calls the options' hooks first, then each subscriber in order, until it unsubscribes", () => {
    const calls: string[] = [];
    const events = new RateLimitEvents({
      decision: (e) => calls.push(`options:${e.allowed}`),
      storeError: (e) => calls.push(`options:${e.message}`),
    });
    const stopA = events.subscribe({ decision: (e) => calls.push(`a:${e.allowed}`) });
    events.subscribe({ decision: (e) => calls.push(`b:${e.allowed}`), storeError: (e) => calls.push(`b:${e.message}`) });

    events.hooks.decision!(event(true));
    events.hooks.storeError!(new Error('down'));
    stopA();
    events.hooks.decision!(event(false));

    expect(calls).toEqual(['options:true', 'a:true', 'b:true', 'options:down', 'b:down', 'options:false', 'b:false']);
  });

  it('a listener that unsubscribes while called does not make the next one miss the event', () => {
    const events = new RateLimitEvents();
    const seen: string[] = [];
    const stop = events.subscribe({ decision: () => (seen.push('once'), stop()) });
    events.subscribe({ decision: () => seen.push('always') });
    events.hooks.decision!(event(true));
    events.hooks.decision!(event(true));
    expect(seen).toEqual(['once', 'always', 'always']);
  });

  it('a throwing listener is logged once per interval and never stops the others', () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const events = new RateLimitEvents({
      decision: () => {
        throw new Error('metrics backend gone');
      },
    });
    let delivered = 0;
    events.subscribe({ decision: () => delivered++ });
    expect(() => events.hooks.decision!(event(true))).not.toThrow();
    events.hooks.decision!(event(true));
    expect(delivered).toBe(2);
    expect(warn.mock.calls).toEqual([['a rate-limit decision listener threw (ignored): metrics backend gone']]);
  });
});

describe('RateLimitEvents.hooks.decision', () => {
  it('is offered only while some listener listens to decisions (an unobserved decision makes no event)', () => {
    const events = new RateLimitEvents({ storeError: () => undefined });
    expect(events.hooks.decision).toBeUndefined();
    const stop = events.subscribe({ decision: () => undefined });
    expect(events.hooks.decision).toEqual(expect.any(Function));
    stop();
    expect(events.hooks.decision).toBeUndefined();
    expect(new RateLimitEvents({ decision: () => undefined }).hooks.decision).toEqual(expect.any(Function));
  });
});
