/**
 * MemoryStore bounds: at most `maxKeys` states (least recently used evicted first), and expired states
 * swept on later writes without any timer, once the store holds more than a tenth of `maxKeys`.
 */
import { memoryHarness } from '../support/memory-harness';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';

describe('MemoryStore', () => {
  let timers: jest.SpyInstance[];
  beforeEach(() => {
    timers = [jest.spyOn(global, 'setTimeout'), jest.spyOn(global, 'setInterval'), jest.spyOn(global, 'setImmediate')];
  });
  afterEach(() => {
    // No store operation here may schedule anything: expiry and eviction happen on writes.
    for (const spy of timers) expect(spy).not.toHaveBeenCalled();
    jest.restoreAllMocks();
  });

  describe('memory bound (maxKeys 1000)', () => {
    it('100 000 distinct trackers never hold more than 1000 states, and a hot tracker keeps its state', async () => {
      const h = memoryHarness(1000);
      const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: '1d' };
      const hot: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1_000_000, window: '1d', name: 'hot' };
      let largest = 0;
      let hotUses = 0;
      let wrong = 0;
      for (let i = 0; i < 100_000; i++) {
        if ((await h.limiter.consume(policy, `tracker-${i}`)).remaining !== 4) wrong++;
        if (i % 100 === 0) {
          hotUses++;
          if ((await h.limiter.consume(hot, 'hot-user')).remaining !== 1_000_000 - hotUses) wrong++;
        }
        largest = Math.max(largest, h.store.size);
      }
      expect(wrong).toBe(0);
      expect(largest).toBe(1000);
      expect(h.store.size).toBe(1000);
      // The most recent trackers are still counted; the oldest were evicted (their quota restarts full).
      expect((await h.limiter.peek(policy, 'tracker-99999')).remaining).toBe(4);
      expect((await h.limiter.peek(policy, 'tracker-0')).remaining).toBe(5);
      expect((await h.limiter.peek(hot, 'hot-user')).remaining).toBe(1_000_000 - hotUses);
    });

    it('evicts the least recently used state: a key read recently survives, an idle one goes', async () => {
      const h = memoryHarness(3);
      const policy: RateLimitPolicy = { algorithm: 'sliding-log', limit: 10, window: '1h' };
      for (const key of ['a', 'b', 'c']) await h.limiter.consume(policy, key);
      await h.limiter.consume(policy, 'a'); // a becomes the most recently used; b is now the oldest
      await h.limiter.consume(policy, 'd'); // one too many: evicts b
      expect(h.store.size).toBe(3);
      expect((await h.limiter.peek(policy, 'a')).remaining).toBe(8);
      expect((await h.limiter.peek(policy, 'c')).remaining).toBe(9);
      expect((await h.limiter.peek(policy, 'd')).remaining).toBe(9);
      expect((await h.limiter.peek(policy, 'b')).remaining).toBe(10);
      // A peek counts as a use too: after peeking c, a write evicts a (the oldest now), not c.
      await h.limiter.peek(policy, 'c');
      await h.limiter.peek(policy, 'd');
      await h.limiter.consume(policy, 'e');
      expect((await h.limiter.peek(policy, 'c')).remaining).toBe(9);
      expect((await h.limiter.peek(policy, 'a')).remaining).toBe(10);
    });
  });

  describe('expiry without timers', () => {
    it('expired states are swept by later writes, so the size shrinks once the clock passes their expiry', async () => {
      // 500 states are past a tenth of maxKeys, where new keys start sweeping.
      const h = memoryHarness(1000);
      const short: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: 1000 };
      const long: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: '1h', name: 'long' };
      for (let i = 0; i < 500; i++) await h.limiter.consume(short, `old-${i}`);
      expect(h.store.size).toBe(500);

      h.advance(999); // not expired yet: writes sweep nothing
      await h.limiter.consume(long, 'new-0');
      expect(h.store.size).toBe(501);

      h.advance(2); // past the window: every old state has expired
      const sizes: number[] = [];
      for (let i = 1; i <= 200; i++) {
        await h.limiter.consume(long, `new-${i}`);
        sizes.push(h.store.size);
      }
      expect(sizes[0]).toBeLessThan(502); // the first write already swept something
      for (let i = 1; i < sizes.length && sizes[i - 1] > 201; i++) expect(sizes[i]).toBeLessThan(sizes[i - 1]);
      expect(h.store.size).toBe(201); // only the live states are left
    });

    it('an expired state reads as absent, and its entry is reused by the next write', async () => {
      const h = memoryHarness();
      const policy: RateLimitPolicy = { algorithm: 'token-bucket', limit: 10, window: 1000 };
      for (let i = 0; i < 10; i++) await h.limiter.consume(policy, 'k');
      expect(h.store.size).toBe(1);
      expect((await h.limiter.consume(policy, 'k')).allowed).toBe(false);
      h.advance(1001); // the state's TTL (1000 ms, when the bucket is full again) has passed
      expect((await h.limiter.peek(policy, 'k')).remaining).toBe(10);
      expect(h.store.size).toBe(1);
      expect((await h.limiter.consume(policy, 'k')).remaining).toBe(9);
      expect(h.store.size).toBe(1);
    });

    it('below a tenth of maxKeys, new keys sweep nothing: expired states wait to be reused', async () => {
      const h = memoryHarness(1000);
      const short: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: 1000 };
      for (let i = 0; i < 50; i++) await h.limiter.consume(short, `old-${i}`);
      h.advance(1001);
      for (let i = 0; i < 50; i++) await h.limiter.consume(short, `new-${i}`);
      expect(h.store.size).toBe(100);
      // Each old key's next decision reads a fresh window from its expired entry, and rewrites it in place.
      for (let i = 0; i < 50; i++) expect((await h.limiter.consume(short, `old-${i}`)).remaining).toBe(4);
      expect(h.store.size).toBe(100);
      h.advance(1000); // every state has expired again
      await h.limiter.consume(short, 'one-more'); // 101 keys: past a tenth, this write sweeps eight
      expect(h.store.size).toBe(93);
    });

    it('a state that returns to "no state" is deleted rather than kept', async () => {
      const h = memoryHarness();
      const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: 1000 };
      await h.limiter.consume(policy, 'k', { cost: 0 }); // cost 0 behaves like a peek: writes nothing
      expect(h.store.size).toBe(0);
      await h.limiter.consume(policy, 'k');
      expect(h.store.size).toBe(1);
      await h.limiter.reset(policy, 'k');
      expect(h.store.size).toBe(0);
    });
  });
});
