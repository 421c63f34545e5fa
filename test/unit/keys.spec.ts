/**
 * Tracker → key encoding: no client can pick a tracker that lands on another client's key, break the key
 * layout (`:`), or move the key to another cluster slot (`{`, `}`).
 */
import { routeTrackers } from '../../lib/routes/decide-route';
import { encodeTracker, trackerKeyPrefix } from '../../lib/shared/keys';
import { StringMemo } from '../../lib/shared/string-memo';

/** The cluster hash tag of a key: the part between the first `{` and the next `}` (when non-empty). */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  if (close < 0 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

const TRICKY = [
  'a:b',
  'a%3Ab',
  'a%253Ab',
  '{x}',
  '%7Bx%7D',
  'x}',
  '{',
  '}',
  '{}',
  'a\nb',
  'a\r\nb',
  'a%0Ab',
  'a b',
  'a+b',
  'a%20b',
  "!'()*~",
  '%21%27%28%29%2A%7E',
  '#abc',
  '%23abc',
  '*',
  '?',
  '[a]',
  '\\',
  '/',
  '\0',
  'é',
  'e\u0301',
  '😀',
  'a😀b',
  '\uD83D',
  '\uDE00',
  '\uDE00\uD83D',
  'x\uD83D',
  'x\uD83E',
  '%uD83D',
  'rl:{victim}:svc:default:fw',
  'victim}:svc:default:fw\n{x',
  '::1',
  '2001:db8::1',
  '',
];
const LONG = [
  'a'.repeat(128),
  'a'.repeat(129),
  'a'.repeat(160),
  'a'.repeat(161),
  'a'.repeat(5_000),
  'b'.repeat(5_000),
  `${'a'.repeat(4_999)}b`,
  ':'.repeat(5_000),
  '{'.repeat(5_000),
  `${'x'.repeat(300)}\uD800`,
  `${'x'.repeat(300)}\uD801`,
  `${'x'.repeat(300)}\uFFFD`,
];

describe('encodeTracker', () => {
  it('leaves safe trackers (IPs, ids, emails, up to 128 characters) unchanged', () => {
    for (const t of ['127.0.0.1', 'user-42', 'alice@example.com', 'A_b.c-D', 'a'.repeat(128), '0']) expect(encodeTracker(t)).toBe(t);
  });

  it('keeps a tracker as it is exactly when it is 1–128 of A-Za-z0-9._@-, and encodes only the colons of 1–53 with colons', () => {
    for (let code = 0; code < 0x80; code++) {
      const tracker = `a${String.fromCharCode(code)}b`;
      const safe = /^[A-Za-z0-9._@-]+$/.test(tracker);
      const encoded = encodeTracker(tracker);
      if (safe) expect(encoded).toBe(tracker);
      else if (code === 0x3a) expect(encoded).toBe('a%3Ab');
      else expect(encoded).not.toBe(tracker);
    }
    expect(encodeTracker(`${'a'.repeat(51)}:b`)).toBe(`${'a'.repeat(51)}%3Ab`);
    expect(encodeTracker(`${'a'.repeat(52)}:b`)).toBe(`${'a'.repeat(52)}%3Ab`);
    expect(encodeTracker('a'.repeat(129))).toBe('a'.repeat(129));
    expect(encodeTracker('')).toBe('');
  });

  it('percent-encodes every character that could change the key layout or slot', () => {
    expect(encodeTracker('a:b')).toBe('a%3Ab');
    expect(encodeTracker('a%3Ab')).toBe('a%253Ab');
    expect(encodeTracker('{x}')).toBe('%7Bx%7D');
    expect(encodeTracker('a\nb')).toBe('a%0Ab');
    expect(encodeTracker("!'()*~")).toBe('%21%27%28%29%2A%7E');
    expect(encodeTracker('2001:db8::1')).toBe('2001%3Adb8%3A%3A1');
    expect(encodeTracker('é')).toBe('%C3%A9');
  });

  it('encodes characters outside the BMP and lone surrogates instead of throwing', () => {
    expect(encodeTracker('😀')).toBe('%F0%9F%98%80');
    expect(encodeTracker('a😀b')).toBe('a%F0%9F%98%80b');
    expect(() => encodeTracker('\uD83D')).not.toThrow();
    expect(encodeTracker('\uD83D')).not.toBe(encodeTracker('\uD83E'));
  });

  it('gives distinct inputs distinct outputs (tricky and long cases)', () => {
    const inputs = [...TRICKY, ...LONG];
    const outputs = new Map<string, string>();
    for (const input of inputs) {
      const out = encodeTracker(input);
      const clash = outputs.get(out);
      if (clash !== undefined)
        throw new Error(`${JSON.stringify(input.slice(0, 40))} and ${JSON.stringify(clash.slice(0, 40))} both encode to ${out}`);
      outputs.set(out, input);
    }
    expect(outputs.size).toBe(inputs.length);
  });

  it('never lets an encoded tracker contain a key or slot delimiter, or anything but printable ASCII', () => {
    for (const input of [...TRICKY, ...LONG]) {
      const out = encodeTracker(input);
      expect(out).toMatch(/^[A-Za-z0-9._@%#-]*$/);
      expect(out).not.toMatch(/[{}:\s]/);
    }
  });

  it('replaces long trackers by # + a SHA-256 digest, which no short tracker can produce', () => {
    for (const input of LONG.filter((t) => t.length > 160)) {
      const out = encodeTracker(input);
      expect(out).toMatch(/^#[A-Za-z0-9_-]{43}$/);
    }
    // A tracker that looks like a digest is encoded, so it can never equal one.
    const digest = encodeTracker('a'.repeat(5_000));
    expect(encodeTracker(digest)).toBe(`%23${digest.slice(1)}`);
    // The length limit applies after encoding: 53 colons encode to 159 characters, 54 to 162.
    expect(encodeTracker(':'.repeat(53))).toBe('%3A'.repeat(53));
    expect(encodeTracker(':'.repeat(54))).toMatch(/^#/);
  });

  it('is deterministic (every instance computes the same key)', () => {
    for (const input of [...TRICKY, ...LONG]) expect(encodeTracker(input)).toBe(encodeTracker(`${input}`));
  });
});

describe('trackerKeyPrefix', () => {
  it('puts the encoded tracker in the hash tag, so every key of a tracker shares one slot', () => {
    for (const input of [...TRICKY.filter(Boolean), ...LONG]) {
      const prefix = trackerKeyPrefix('rl', input);
      expect(prefix).toBe(`rl:{${encodeTracker(input)}}:`);
      expect(hashTag(`${prefix}svc:default:fw`)).toBe(encodeTracker(input));
      expect(hashTag(`${prefix}svc:default:b`)).toBe(encodeTracker(input));
    }
  });

  it('keeps apps with different prefixes apart', () => {
    expect(trackerKeyPrefix('app1', 'u')).not.toBe(trackerKeyPrefix('app2', 'u'));
  });

  it('cannot be steered into another tracker key by a crafted tracker', () => {
    const victim = `${trackerKeyPrefix('rl', 'victim')}svc:default:fw`;
    for (const crafted of ['victim}:svc:default:fw', 'rl:{victim}:svc:default:fw', '{victim}', 'victim}:x:{y']) {
      const key = `${trackerKeyPrefix('rl', crafted)}svc:default:fw`;
      expect(key).not.toBe(victim);
      expect(hashTag(key)).not.toBe('victim');
    }
  });
});

describe('StringMemo (tracker prefixes and keys remembered on the request path)', () => {
  test('builds a value once per key and hands back the same one', () => {
    const built: string[] = [];
    const memo = new StringMemo((tracker) => {
      built.push(tracker);
      return trackerKeyPrefix('rl', tracker);
    });
    const first = memo.get('ip:10.0.0.1');
    expect(first).toBe('rl:{ip%3A10.0.0.1}:');
    expect(memo.get(['ip', '10.0.0.1'].join(':'))).toBe(first);
    expect(memo.get('user:7')).toBe('rl:{user%3A7}:');
    expect(built).toEqual(['ip:10.0.0.1', 'user:7']);
  });

  test("the guard's tracker memo gives every tracker, remembered (up to 256 characters) or not, keys under the prefix trackerKeyPrefix builds", () => {
    const trackers = routeTrackers('rl');
    for (let round = 0; round < 2; round++) {
      for (const tracker of [...TRICKY.filter((t) => t !== ''), ...LONG, 'x'.repeat(256), 'x'.repeat(257), ':'.repeat(256)]) {
        expect([tracker, trackers.get(tracker).keys.get('svc:p:f').key]).toEqual([tracker, `${trackerKeyPrefix('rl', tracker)}svc:p:f`]);
      }
    }
  });

  test('bounded: when full it starts over, so a flood of distinct keys never holds more than maxSize', () => {
    const built: string[] = [];
    const memo = new StringMemo((key) => {
      built.push(key);
      return key.toUpperCase();
    }, 3);
    for (const key of ['a', 'b', 'c', 'a', 'd', 'a', 'e', 'f', 'd']) expect(memo.get(key)).toBe(key.toUpperCase());
    // a b c fill it; a is remembered; d empties it first; a is built again; e; f empties it again; d is built again.
    expect(built).toEqual(['a', 'b', 'c', 'd', 'a', 'e', 'f', 'd']);
  });
});
