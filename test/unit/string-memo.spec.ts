/**
 * StringMemo, the bounded memo behind the request path's tracker and key caches: bounded by count and by key
 * length, so what it holds is bounded in bytes whatever clients send (heap measured in
 * test/integration/hostile-trackers.spec.ts). Once full, it takes a key only on its second miss in a while,
 * so one-off keys never push out the ones that come back, and it stops looking keys up while nearly none
 * are found.
 */
import { StringMemo } from '../../lib/shared/string-memo';

/** A memo of `key.length` that records every key it had to make a value for. */
function recording(maxSize?: number, options?: ConstructorParameters<typeof StringMemo>[2]) {
  const made: string[] = [];
  const memo = new StringMemo(
    (key) => {
      made.push(key);
      return `v${key.length}`;
    },
    maxSize,
    options,
  );
  return { memo, made };
}

describe('StringMemo', () => {
  it('remembers keys of up to 256 characters, and makes the value of a longer key on every call', () => {
    const { memo, made } = recording();
    const longest = 'a'.repeat(256);
    const tooLong = 'a'.repeat(257);
    for (let i = 0; i < 3; i++) {
      expect(memo.get(longest)).toBe('v256');
      expect(memo.get(tooLong)).toBe('v257');
    }
    expect(made.map((key) => key.length)).toEqual([256, 257, 257, 257]);
  });

  it('hands the maker a key equal to the one asked for, and gives back the same value for an equal key', () => {
    const made: string[] = [];
    const memo = new StringMemo((key) => {
      made.push(key);
      return { key };
    });
    const header = `abc, ${'x'.repeat(1_000)}`;
    const sliced = header.slice(0, 3);
    const value = memo.get(sliced);
    expect(value).toEqual({ key: 'abc' });
    expect(memo.get(['a', 'b', 'c'].join(''))).toBe(value);
    expect(made).toEqual(['abc']);
  });

  it('does not let long keys evict remembered ones: they never enter it', () => {
    const { memo, made } = recording(3);
    for (const key of ['a', 'b', 'c']) memo.get(key);
    for (let i = 0; i < 100; i++) memo.get(`${i}${'z'.repeat(300)}`);
    for (const key of ['a', 'b', 'c']) memo.get(key);
    expect(made.filter((key) => key.length < 300)).toEqual(['a', 'b', 'c']);
  });

  it('takes another key length bound (maxKeyLength), up to none at all', () => {
    const short = recording(undefined, { maxKeyLength: 4 });
    const unbounded = recording(undefined, { maxKeyLength: Infinity });
    for (let i = 0; i < 2; i++) {
      for (const { memo } of [short, unbounded]) for (const key of ['abcd', 'abcde', 'a'.repeat(10_000)]) memo.get(key);
    }
    expect(short.made.map((key) => key.length)).toEqual([4, 5, 10_000, 5, 10_000]);
    expect(unbounded.made.map((key) => key.length)).toEqual([4, 5, 10_000]);
  });

  it('with ownKeys (keys the library built, not copied), remembers and starts over the same way', () => {
    const { memo, made } = recording(2, { ownKeys: true });
    for (const key of ['a', 'b', 'a', 'c', 'a']) memo.get(key);
    // a b fill it; a is remembered; c empties it first; a is made again.
    expect(made).toEqual(['a', 'b', 'c', 'a']);
  });

  it('makes each key of a working set that fits once, however it is visited, past four keys held in fields', () => {
    const { memo, made } = recording(100);
    const keys = Array.from({ length: 100 }, (_, i) => `k${i}`);
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < keys.length; i++)
        expect(memo.get(keys[(i * (round + 1) * 7) % keys.length])).toBe(`v${keys[(i * (round + 1) * 7) % keys.length].length}`);
    }
    expect(made).toHaveLength(100);
    expect(new Set(made).size).toBe(100);
  });

  it('keeps what it holds when a set over twice its size cycles through it: the keys that did not fit are made on every visit', () => {
    // The old memo emptied itself whenever it was full, so such a cycle made every key on every visit.
    const { memo, made } = recording(100);
    const keys = Array.from({ length: 250 }, (_, i) => `cycle-${i}`);
    const cycles = 20;
    for (let round = 0; round < cycles; round++) for (const key of keys) memo.get(key);
    const counts = new Map<string, number>();
    for (const key of made) counts.set(key, (counts.get(key) ?? 0) + 1);
    expect(keys.slice(0, 100).map((key) => counts.get(key))).toEqual(Array(100).fill(1));
    expect(keys.slice(100).map((key) => counts.get(key))).toEqual(Array(150).fill(cycles));
  });

  it('does not let a flood of keys seen once push out keys that come back', () => {
    const { memo, made } = recording(1_000);
    const hot = Array.from({ length: 100 }, (_, i) => `hot-${i}`);
    for (let i = 0; i < 100_000; i++) {
      memo.get(hot[i % hot.length]);
      memo.get(`once-${i}`);
    }
    const hotMade = made.filter((key) => key.startsWith('hot-'));
    expect(made.filter((key) => key.startsWith('once-'))).toHaveLength(100_000);
    // Each hot key made when it first came, and again (twice: missed, then taken) each time a one-off key the
    // filter mistook for a repeat emptied the full memo; the old memo emptied itself every 1,000 one-off keys
    // (10,000 makes of hot keys).
    expect(new Set(hotMade).size).toBe(100);
    expect(hotMade.length).toBeLessThanOrEqual(500);
  });

  it('takes back a working set as large as itself after a flood', () => {
    const { memo, made } = recording(1_000);
    for (let i = 0; i < 100_000; i++) memo.get(`scan-${i}`);
    const working = Array.from({ length: 1_000 }, (_, i) => `user-${i}`);
    const makesPerCycle: number[] = [];
    for (let cycle = 0; cycle < 60; cycle++) {
      const before = made.length;
      for (const key of working) memo.get(key);
      makesPerCycle.push(made.length - before);
    }
    // Found whole again: the last cycles make nothing.
    expect(makesPerCycle.slice(-5)).toEqual([0, 0, 0, 0, 0]);
  });

  it('takes a key that comes back into a full memo on its second miss, emptying the memo first', () => {
    const { memo, made } = recording(10);
    for (let i = 0; i < 10; i++) memo.get(`first-${i}`);
    for (let visit = 0; visit < 5; visit++) memo.get('late');
    // Missed twice (not taken, then taken into the emptied memo), then found.
    expect(made.filter((key) => key === 'late')).toHaveLength(2);
    memo.get('first-0');
    expect(made.filter((key) => key === 'first-0')).toHaveLength(2);
  });

  it('looks every key up while it has room: a new working set is found from its second round on', () => {
    const { memo, made } = recording(10_000);
    const working = Array.from({ length: 5_000 }, (_, i) => `user-${i}`);
    // The first round misses every key (four whole windows of 1,024 lookups without a hit); each miss is taken.
    for (const key of working) memo.get(key);
    const before = made.length;
    for (const key of working) memo.get(key);
    expect(made.length).toBe(before);
  });

  it('once full, stops looking most keys up while nearly none are found, and looks every key up again once they are', () => {
    const { memo, made } = recording(10_000);
    const held = Array.from({ length: 10 }, (_, i) => `held-${i}`);
    for (const key of held) memo.get(key);
    // Full: the memo holds 10,000 keys, the held ones among them.
    for (let i = 0; i < 10_000 - held.length; i++) memo.get(`fill-${i}`);
    // Two windows of 1,024 lookups without a hit: the second one looks up one call in eight.
    for (let i = 0; i < 1_024 + 8 * 1_024; i++) memo.get(`scan-${i}`);
    const before = made.length;
    for (let i = 0; i < 8; i++) expect(memo.get('held-0')).toBe('v6');
    // Held, yet made again by the calls that did not look (one or two of the eight looked).
    expect(made.length - before).toBeGreaterThanOrEqual(6);
    // A window of lookups that all hit: from then on every call looks, and finds.
    for (let i = 0; i < 8 * 1_024; i++) memo.get(held[i % held.length]);
    const settled = made.length;
    for (let i = 0; i < 10_000; i++) memo.get(held[i % held.length]);
    expect(made.length).toBe(settled);
  });
});
