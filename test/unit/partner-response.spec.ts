/**
 * Reading a partner's response: the Structured Field parser against `structured-headers` (an independent
 * implementation of RFC 9651), HTTP-dates against RFC 9110's own examples, and `pauseAskedMs` over every
 * field it reads, in every header shape HTTP clients hand out.
 */
import { DisplayString, parseDictionary, parseList, Token, type BareItem, type InnerList, type Item } from 'structured-headers';
import { parseHttpDate } from '../../lib/http/http-date';
import { parseSfDictionary, parseSfList, type SfBareItem, type SfMember } from '../../lib/http/structured-fields';
import { DEFAULT_MAX_PAUSE_MS, pauseAskedMs, type PartnerResponse } from '../../lib/service/partner-response';

/** RFC 9110 §5.6.7's example instant, Sun, 06 Nov 1994 08:49:37 GMT. */
const EXAMPLE_MS = 784_111_777_000;
const NOW = Date.UTC(2025, 0, 1);

/** One bare item as both parsers can state it. */
function ours(item: SfBareItem): unknown {
  switch (item.type) {
    case 'integer':
    case 'decimal':
      return { n: item.value };
    case 'string':
      return { s: item.value };
    case 'token':
      return { t: item.value };
    case 'byte-sequence':
      return { b: Buffer.from(item.value, 'base64').toString('hex') };
    case 'boolean':
      return { bool: item.value };
    case 'date':
      return { date: item.value };
    case 'display-string':
      return { d: item.value };
  }
}

function theirs(item: BareItem): unknown {
  if (typeof item === 'number') return { n: item };
  if (typeof item === 'string') return { s: item };
  if (typeof item === 'boolean') return { bool: item };
  if (item instanceof Token) return { t: item.toString() };
  if (item instanceof DisplayString) return { d: item.toString() };
  if (item instanceof Date) return { date: item.getTime() / 1000 };
  return { b: Buffer.from(item as ArrayBuffer).toString('hex') };
}

const ourMember = (m: SfMember): unknown =>
  'items' in m
    ? { items: m.items.map(ourMember), params: [...m.params].map(([k, v]) => [k, ours(v)]) }
    : { value: ours(m.value), params: [...m.params].map(([k, v]) => [k, ours(v)]) };
const theirMember = (m: Item | InnerList): unknown =>
  Array.isArray(m[0])
    ? { items: (m[0] as Item[]).map(theirMember), params: [...m[1]].map(([k, v]) => [k, theirs(v)]) }
    : { value: theirs(m[0] as BareItem), params: [...m[1]].map(([k, v]) => [k, theirs(v)]) };

const outcome = (parse: () => unknown): unknown => {
  try {
    return parse();
  } catch {
    return 'invalid';
  }
};

describe('Structured Fields (RFC 9651): the same as structured-headers', () => {
  const lists = [
    '"default";r=0;t=30',
    '"default";r=50;t=30, "daily";r=0;t=3600',
    '"default";r=0;t=30;pk=:cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:',
    'default;r=0;t=30',
    '  "a";r=1 ,\t"b";r=2  ',
    'sugar, tea, rum',
    '("foo" "bar");lvl=5, ("bar" "baz");lvl=1, ()',
    '( 1 2 );p',
    '1;a;b=?0;c=?1, -42, 1.5, -0.001, 999999999999999, 123456789012.123',
    '"with \\"quotes\\" and \\\\ backslash"',
    'foo/bar:baz, *star',
    ':aGVsbG8=:, :aGk:, ::',
    '%"f%c3%bc%c3%bc", %"plain"',
    '"a";x=1;x=2',
    '@1659578233',
    '',
    // invalid
    '"default";r=0;t=30,',
    'a=1',
    '"unterminated',
    '1.2345',
    '1234567890123456',
    '1234567890123.1',
    '1.',
    '-',
    '"a";R=1',
    '"a" ;r=1',
    '\t"a"',
    '"é"',
    '"a"\u00e9',
    '?2',
    ':a=b:',
    ':aGk==:',
    '%"%C3%BC"',
    '%"%c3"',
    '("a" "b"',
    '("a","b")',
    '"\\x"',
    '@1.5',
  ];

  it.each(lists)('list %p', (field) => {
    const mine = outcome(() => parseSfList(field).map(ourMember));
    const reference = outcome(() => parseList(field).map(theirMember));
    expect(mine).toEqual(reference);
  });

  const dictionaries = [
    'limit=100, remaining=0, reset=30',
    'a=?0, b, c;foo=bar',
    'rating=1.5, feelings=(joy sadness)',
    'a=1, b=2, a=3',
    'a=1,',
    '"a"=1',
    'A=1',
  ];

  it.each(dictionaries)('dictionary %p', (field) => {
    const mine = outcome(() => [...parseSfDictionary(field)].map(([k, m]) => [k, ourMember(m)]));
    const reference = outcome(() => [...parseDictionary(field)].map(([k, m]) => [k, theirMember(m)]));
    expect(mine).toEqual(reference);
  });

  it('tells integers from decimals (the ratelimit fields need integers)', () => {
    expect(parseSfList('1, 1.0, -3').map((m) => ('value' in m ? m.value : undefined))).toEqual([
      { type: 'integer', value: 1 },
      { type: 'decimal', value: 1 },
      { type: 'integer', value: -3 },
    ]);
  });

  it('reads a date followed by more members (RFC 9651 §4.2.9 parses it as an integer; structured-headers 2.1 stops at the end of input only)', () => {
    expect(parseSfList('@12, 1').map((m) => ('value' in m ? m.value : undefined))).toEqual([
      { type: 'date', value: 12 },
      { type: 'integer', value: 1 },
    ]);
  });
});

describe('HTTP-date (RFC 9110 §5.6.7)', () => {
  it.each([
    ['Sun, 06 Nov 1994 08:49:37 GMT', EXAMPLE_MS],
    ['Sunday, 06-Nov-94 08:49:37 GMT', EXAMPLE_MS],
    ['Sun Nov  6 08:49:37 1994', EXAMPLE_MS],
    ['Fri, 31 Dec 1999 23:59:59 GMT', Date.UTC(1999, 11, 31, 23, 59, 59)],
    ['Thu, 29 Feb 2024 12:00:00 GMT', Date.UTC(2024, 1, 29, 12)],
    ['Sat, 01 Jan 0050 00:00:00 GMT', new Date('0050-01-01T00:00:00Z').getTime()],
    // rfc850's two-digit year: no more than 50 years ahead of now (2025), else the century before
    ['Tuesday, 01-Jan-30 00:00:00 GMT', Date.UTC(2030, 0, 1)],
    ['Friday, 01-Jan-99 00:00:00 GMT', Date.UTC(1999, 0, 1)],
    ['Sun Nov 16 08:49:37 1994', Date.UTC(1994, 10, 16, 8, 49, 37)],
  ])('%p', (value, expected) => {
    expect(parseHttpDate(value, NOW)).toBe(expected);
  });

  it.each([
    'Sun, 06 Nov 1994 08:49:37 UTC',
    'sun, 06 nov 1994 08:49:37 gmt',
    'Sun, 6 Nov 1994 08:49:37 GMT',
    'Sun, 31 Feb 2025 00:00:00 GMT',
    'Sun, 06 Nov 1994 24:00:00 GMT',
    'Sun, 06 Nov 1994 08:60:00 GMT',
    'Sun Nov 6 08:49:37 1994',
    'Sun, 06 Nov 1994 08:49:37 GMT ',
    '1994-11-06T08:49:37Z',
    '1',
    '',
  ])('garbage %p', (value) => {
    expect(parseHttpDate(value, NOW)).toBeUndefined();
  });
});

describe('pauseAskedMs', () => {
  const asked = (response: PartnerResponse, maxMs = DEFAULT_MAX_PAUSE_MS) => pauseAskedMs(response, maxMs, NOW);
  const plain = (status: number, headers: Record<string, unknown>) => asked({ status, headers });

  describe('Retry-After', () => {
    it('delta-seconds on a fetch Response (429 and 503)', () => {
      expect(asked(new Response(null, { status: 429, headers: { 'Retry-After': '120' } }))).toBe(120_000);
      expect(asked(new Response(null, { status: 503, headers: { 'Retry-After': '0' } }))).toBe(0);
      expect(plain(503, { 'retry-after': '7' })).toBe(7_000);
    });

    it('an HTTP-date, counted from the response Date when it has one (both on the partner clock)', () => {
      const headers = { 'retry-after': 'Fri, 31 Dec 1999 23:59:59 GMT', date: 'Fri, 31 Dec 1999 23:58:59 GMT' };
      expect(plain(429, headers)).toBe(60_000);
      expect(asked({ status: 429, headers: { 'retry-after': new Date(NOW + 90_000).toUTCString() } })).toBe(90_000);
    });

    it('ignores a date in the past and garbage, and goes on to the next field', () => {
      const ratelimit = '"default";r=0;t=30';
      expect(plain(429, { 'retry-after': 'Fri, 31 Dec 1999 23:59:59 GMT', ratelimit })).toBe(30_000);
      for (const garbage of ['soon', '-5', '1.5', '2 minutes', '', '0x10']) {
        expect({ garbage, ms: plain(429, { 'retry-after': garbage, ratelimit }) }).toEqual({ garbage, ms: 30_000 });
      }
      expect(plain(429, { 'retry-after': 'soon' })).toBe(0);
    });

    it('only on a 429 or a 503 (on a 3xx it is a redirect delay, on a 200 nothing)', () => {
      expect(plain(200, { 'retry-after': '5' })).toBe(0);
      expect(plain(301, { 'retry-after': '5' })).toBe(0);
      expect(asked({ headers: { 'retry-after': '5' } })).toBe(0);
    });

    it('takes precedence over the ratelimit fields, as the draft says', () => {
      expect(
        plain(429, { 'retry-after': '10', ratelimit: '"default";r=0;t=30', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '50' }),
      ).toBe(10_000);
    });
  });

  describe('RateLimit (draft-ietf-httpapi-ratelimit-headers)', () => {
    it.each([
      ['"default";r=0;t=30', 30_000],
      ['"default";r=50;t=30, "daily";r=0;t=3600, "hourly";r=0;t=600', 3_600_000],
      ['"default";r=1;t=30', 0],
      ['"default";r=0;t=30;pk=:cHJldGVuZCB0aGlzIGlzIGJpbmFyeSBjb250ZW50Lg==:', 30_000],
      ['default;r=0;t=2', 2_000],
      // a policy without `t`, or with a decimal one, gives no time: it is left out
      ['"a";r=0, "b";r=0;t=1.5, "c";r=0;t=4', 4_000],
      ['("a" "b");r=0;t=9, "c";r=2;t=5', 0],
      // older drafts' Dictionary form (express-rate-limit's `draft-7`)
      ['limit=100, remaining=0, reset=30', 30_000],
      ['limit=100, remaining=4, reset=30', 0],
    ])('%p → %p ms', (ratelimit, expected) => {
      expect(plain(200, { ratelimit })).toBe(expected);
      // The same answer as a reading with the reference parser, where it can parse the field as a List.
      const reference = outcome(() =>
        parseList(ratelimit)
          .filter((m): m is Item => !Array.isArray(m[0]))
          .filter(([, p]) => p.get('r') === 0 && Number.isInteger(p.get('t')))
          .reduce((most, [, p]) => Math.max(most, (p.get('t') as number) * 1000), 0),
      );
      if (reference !== 'invalid' && !ratelimit.includes('t=1.5')) expect(reference).toBe(expected);
    });

    it('a field that is not a valid Structured Field is ignored whole: the legacy fields decide', () => {
      const legacy = { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '12' };
      expect(plain(429, { ratelimit: '"default";r=0;t=30,', ...legacy })).toBe(12_000);
      expect(plain(429, { ratelimit: '"default";r=0;t=30;R=1', ...legacy })).toBe(12_000);
      // a valid field that says quota is left decides: no pause
      expect(plain(429, { ratelimit: '"default";r=3;t=30', ...legacy })).toBe(0);
    });
  });

  describe('X-RateLimit-Remaining / X-RateLimit-Reset', () => {
    const legacy = (remaining: string, reset: string, extra: Record<string, string> = {}) =>
      plain(429, { 'x-ratelimit-remaining': remaining, 'x-ratelimit-reset': reset, ...extra });
    /** A day after NOW on the partner's clock: counted from NOW instead, every reset below would be a day off. */
    const partnerNow = Date.UTC(2025, 0, 2);
    const date = { date: 'Thu, 02 Jan 2025 00:00:00 GMT' };

    it('a reset below 1e9 is seconds from now', () => {
      expect(legacy('0', '45')).toBe(45_000);
      expect(legacy('0', '0.5')).toBe(500);
      expect(legacy('0', '999999999')).toBe(DEFAULT_MAX_PAUSE_MS);
    });

    it('from 1e9 on an epoch timestamp in seconds, from 1e12 in ms, counted from the response Date', () => {
      expect(legacy('0', String(partnerNow / 1000 + 60), date)).toBe(60_000);
      expect(legacy('0', String(partnerNow + 60_000), date)).toBe(60_000);
      expect(legacy('0', String(NOW / 1000 + 15))).toBe(15_000);
      // in the past: ignored
      expect(legacy('0', String(partnerNow / 1000 - 1), date)).toBe(0);
    });

    it('quota left, or values that are not numbers, ask for nothing', () => {
      expect(legacy('3', '45')).toBe(0);
      expect(legacy('0', 'soon')).toBe(0);
      expect(legacy('none', '45')).toBe(0);
      expect(plain(429, { 'x-ratelimit-reset': '45' })).toBe(0);
    });

    it('the unprefixed RateLimit-Remaining / RateLimit-Reset of drafts 00-06 too', () => {
      expect(plain(429, { 'RateLimit-Remaining': '0', 'RateLimit-Reset': '8' })).toBe(8_000);
    });
  });

  describe('header shapes', () => {
    it('Headers, plain objects in any case, arrays, numbers, and anything with a get()', () => {
      expect(asked({ status: 429, headers: new Headers({ 'Retry-After': '3' }) })).toBe(3_000);
      expect(plain(429, { 'Retry-After': '3' })).toBe(3_000);
      expect(plain(429, { 'retry-after': 3 })).toBe(3_000);
      expect(plain(200, { ratelimit: ['"a";r=0;t=5', '"b";r=0;t=9'] })).toBe(9_000);
      const axiosLike = { get: (name: string) => ({ 'retry-after': '4' })[name.toLowerCase()] };
      expect(asked({ status: 429, headers: axiosLike })).toBe(4_000);
    });

    it('statusCode (node:http, got, undici request) when there is no status', () => {
      expect(asked({ statusCode: 429, headers: { 'retry-after': '6' } })).toBe(6_000);
      expect(asked({ statusCode: 200, headers: { 'retry-after': '6' } })).toBe(0);
    });

    it('a field longer than 4096 characters is ignored', () => {
      const long = `"default";r=0;t=30${', "x";r=1;t=1'.repeat(400)}`;
      expect(long.length).toBeGreaterThan(4_096);
      expect(plain(200, { ratelimit: long })).toBe(0);
    });
  });

  it('clamps to maxMs: a partner asking for years gets the maximum', () => {
    expect(plain(429, { 'retry-after': '99999999' })).toBe(DEFAULT_MAX_PAUSE_MS);
    expect(asked({ status: 429, headers: { 'retry-after': '120' } }, 60_000)).toBe(60_000);
    expect(DEFAULT_MAX_PAUSE_MS).toBe(24 * 3_600_000);
  });

  it('0 when the response says nothing', () => {
    expect(asked(new Response(null, { status: 429 }))).toBe(0);
    expect(plain(200, {})).toBe(0);
  });
});
