import { RateLimitConfigError } from '../../lib';
import { UserFunctionDeadlines } from '../../lib/routes/user-function-deadlines';

describe('UserFunctionDeadlines', () => {
  let now = 0;
  const clock = () => now;
  beforeEach(() => {
    now = 0;
    jest.useFakeTimers();
  });
  afterEach(() => jest.useRealTimers());
  const describeBy = () => "@RateLimit on C.h ('b'): by";

  it('passes values that are not promises through as they are, starting no timer', () => {
    const intervals = jest.spyOn(global, 'setInterval');
    const deadlines = new UserFunctionDeadlines(100, clock);
    expect(deadlines.bound('tenant', describeBy)).toBe('tenant');
    expect(deadlines.bound(undefined, describeBy)).toBeUndefined();
    expect(intervals).not.toHaveBeenCalled();
  });

  it('shares one ticker between pending promises, rejects the ones past their deadline, and stops when none is left', async () => {
    const intervals = jest.spyOn(global, 'setInterval');
    const cleared = jest.spyOn(global, 'clearInterval');
    const deadlines = new UserFunctionDeadlines(100, clock);
    const never = deadlines.bound(new Promise<string>(() => undefined), describeBy) as Promise<string>;
    const outcome = never.then(
      () => 'resolved',
      (error: Error) => error,
    );
    const quick = deadlines.bound(Promise.resolve('tenant'), describeBy);
    expect(intervals).toHaveBeenCalledTimes(1);
    await expect(quick).resolves.toBe('tenant');
    now = 99;
    jest.advanceTimersByTime(99);
    now = 100;
    jest.advanceTimersByTime(10);
    const error = await outcome;
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as Error).message).toBe(
      "@RateLimit on C.h ('b'): by: the function did not settle within 100 ms (userFunctionTimeoutMs); the request failed and gave back what it had taken.",
    );
    expect(cleared).toHaveBeenCalled();
    expect(jest.getTimerCount()).toBe(0);
  });

  it('keeps the rejection of a promise that fails in time, and ignores one that settles after its deadline', async () => {
    const deadlines = new UserFunctionDeadlines(100, clock);
    await expect(deadlines.bound(Promise.reject(new Error('lookup failed')), describeBy)).rejects.toThrow('lookup failed');
    let settle!: (value: string) => void;
    const late = deadlines.bound(new Promise<string>((resolve) => (settle = resolve)), describeBy) as Promise<string>;
    const outcome = late.catch((error: Error) => error.message);
    now = 100;
    jest.advanceTimersByTime(25);
    settle('too late');
    expect(await outcome).toMatch(/did not settle within 100 ms/);
  });

  it('fails what is still pending on shutdown', async () => {
    const deadlines = new UserFunctionDeadlines(100, clock);
    const pending = deadlines.bound(new Promise<number>(() => undefined), () => "@RateLimit on C.h ('a'): limit") as Promise<number>;
    deadlines.close();
    await expect(pending).rejects.toThrow("@RateLimit on C.h ('a'): limit: the function was still pending when the application shut down.");
    expect(jest.getTimerCount()).toBe(0);
  });
});
