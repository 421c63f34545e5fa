/**
 * StringMemo, the bounded memo behind the request path's tracker and key caches: bounded by count and by key
 * length, so what it holds is bounded in bytes whatever clients send (heap measured in
 * test/integration/hostile-trackers.spec.ts).
 */
import { StringMemo } from '../../lib/utils/string-memo';

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
});
