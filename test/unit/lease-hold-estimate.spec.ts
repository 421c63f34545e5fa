import { LeaseHoldEstimate } from '../../lib/routes/route-plan';

describe('LeaseHoldEstimate', () => {
  it('has no estimate until a lease has been released', () => {
    expect(new LeaseHoldEstimate().ms).toBeUndefined();
  });

  it('starts at the first hold, then moves a quarter of the way to each new one', () => {
    const estimate = new LeaseHoldEstimate();
    estimate.record(2_000);
    expect(estimate.ms).toBe(2_000);
    estimate.record(6_000);
    expect(estimate.ms).toBe(3_000); // 2,000 + (6,000 − 2,000) / 4
    estimate.record(3_000);
    expect(estimate.ms).toBe(3_000);
    estimate.record(1_000);
    expect(estimate.ms).toBe(2_500); // 3,000 + (1,000 − 3,000) / 4
  });

  it('keeps fractions of a millisecond (Retry-After rounds up to whole seconds)', () => {
    const estimate = new LeaseHoldEstimate();
    estimate.record(10);
    estimate.record(11);
    expect(estimate.ms).toBe(10.25);
    estimate.record(10);
    expect(estimate.ms).toBe(10.1875);
  });

  it('counts a negative hold (a clock step between take and release) as 0', () => {
    const estimate = new LeaseHoldEstimate();
    estimate.record(-500);
    expect(estimate.ms).toBe(0);
    estimate.record(400);
    expect(estimate.ms).toBe(100);
    estimate.record(-400);
    expect(estimate.ms).toBe(75); // 100 + (0 − 100) / 4
  });
});
