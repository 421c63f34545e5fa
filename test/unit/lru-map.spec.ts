/**
 * LruMap's two ways of keeping use order: `touch` moves an entry to the newest end (exact order, as `oldest`
 * reads it), `mark` only records the use, and `evictLeastRecent` reads those uses (what the memory store does).
 */
import { LruMap } from '../../lib/shared/lru-map';

function filled(keys: readonly string[]): LruMap<number> {
  const map = new LruMap<number>();
  keys.forEach((key, i) => map.set(key, i));
  return map;
}

const keysOf = (map: LruMap<number>) => [...map].map(([key]) => key).sort();

describe('LruMap', () => {
  it('touch moves an entry to the newest end: oldest is the least recently touched', () => {
    const map = filled(['a', 'b', 'c']);
    map.touch(map.getNode('a')!);
    expect(map.oldest()).toBe('b');
    map.getNode('b', true);
    expect(map.oldest()).toBe('c');
  });

  it('of a map no larger than the sample, evictLeastRecent deletes exactly the least recently marked entry', () => {
    const map = filled(['a', 'b', 'c', 'd']);
    for (const key of ['c', 'a', 'd', 'b', 'a']) map.mark(map.getNode(key)!);
    map.evictLeastRecent(16);
    expect(keysOf(map)).toEqual(['a', 'b', 'd']);
    map.evictLeastRecent(16);
    expect(keysOf(map)).toEqual(['a', 'b']);
    map.set('e', 4);
    map.mark(map.getNode('b')!);
    map.evictLeastRecent(16);
    expect(keysOf(map)).toEqual(['b', 'e']);
  });

  it('marks and touches order entries alike', () => {
    const map = filled(['a', 'b', 'c']);
    map.mark(map.getNode('a')!);
    map.touch(map.getNode('b')!);
    map.mark(map.getNode('c')!);
    map.evictLeastRecent(16);
    expect(keysOf(map)).toEqual(['b', 'c']);
  });

  it('keeps entries in use through a flood of new ones, even those added first', () => {
    const map = new LruMap<number>();
    const hot = Array.from({ length: 40 }, (_, i) => `hot-${i}`);
    hot.forEach((key, i) => map.set(key, i));
    let missing = 0;
    for (let i = 0; i < 100_000; i++) {
      map.set(`cold-${i}`, i);
      if (i % 10 === 0) {
        for (const key of hot) {
          const node = map.getNode(key);
          if (node === undefined) missing++;
          else map.mark(node);
        }
      }
      while (map.size > 1_000) map.evictLeastRecent(16);
    }
    expect(missing).toBe(0);
    expect(hot.filter((key) => map.getNode(key) === undefined)).toEqual([]);
    expect(map.size).toBe(1_000);
    // What is left: the hot entries and the most recent cold ones (an eviction compares 16, so nearly).
    const cold = [...map].filter(([key]) => key.startsWith('cold-')).map(([, i]) => i);
    expect(cold).toHaveLength(960);
    expect(Math.min(...cold)).toBeGreaterThan(100_000 - 1_000);
  });
});
