/**
 * A calendar decision whose periods Redis's clock is not in (host and Redis clocks 100 days apart) fails, as
 * documented, and only that decision: it opens no circuit, so every other policy is still decided by Redis,
 * and the log says a decision failed, never that Redis is unavailable. Default options, a real redis-server;
 * the host clock (`Date.now`) is the one set 100 days ahead, which is the same disagreement seen from Redis.
 */
import { Logger } from '@nestjs/common';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { servicesOnRedis } from '../support/services-on-redis';

const DAILY: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: { calendar: 'day' }, name: 'daily' };
const STEADY: RateLimitPolicy = { algorithm: 'gcra', limit: 100, window: '1m', name: 'steady' };
const HUNDRED_DAYS = 100 * 86_400_000;

const storeErrors: Error[] = [];
const redis = servicesOnRedis({ hooks: { storeError: (e) => storeErrors.push(e) } });

afterEach(() => jest.restoreAllMocks());

it('calendar decisions fail alone; 40 gcra decisions beside them, and 40 after, are all decided by Redis', async () => {
  const { svc } = await redis.instance();
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  const realNow = Date.now.bind(Date);
  jest.spyOn(Date, 'now').mockImplementation(() => realNow() + HUNDRED_DAYS);

  // In one turn, so they share batches with the calendar decisions.
  const [daily, beside] = await Promise.all([
    Promise.all(Array.from({ length: 40 }, (_, i) => svc.consume(DAILY, `cal-${i}`))),
    Promise.all(Array.from({ length: 40 }, (_, i) => svc.consume(STEADY, `beside-${i}`))),
  ]);
  const after = await Promise.all(Array.from({ length: 40 }, (_, i) => svc.consume(STEADY, `after-${i}`)));

  expect(daily.map((d) => d.reason)).toEqual(daily.map(() => 'store-unavailable'));
  for (const d of [...beside, ...after]) {
    expect(d).toMatchObject({ allowed: true, remaining: 99 });
    expect(d.reason).toBeUndefined();
  }
  expect(storeErrors).toHaveLength(40);
  expect(storeErrors.every((e) => /calendar window: the store's clock \(\d+ ms\) is outside/.test(e.message))).toBe(true);
  const lines = warn.mock.calls.map(([line]) => String(line));
  expect(lines).toEqual([
    expect.stringMatching(/: a decision failed: Redis failed the decision: calendar window: .* the store keeps deciding the others\.$/),
  ]);
});
