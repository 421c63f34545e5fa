/**
 * A parser for Structured Field Values (RFC 9651): Lists and Dictionaries, with every bare item type, so that
 * a field a partner sends is read exactly as the RFC says — or rejected whole, as §4.2 requires when any
 * part of it fails to parse. Used to read a partner's `RateLimit` field (see service/partner-response.ts).
 */

/** A bare item, typed as RFC 9651 §3.3 types it (`integer` and `decimal` apart: fields may require one). */
export type SfBareItem =
  | { type: 'integer' | 'decimal'; value: number }
  | { type: 'string' | 'token' | 'display-string'; value: string }
  /** The base64 text between the colons, not decoded (nothing here needs the bytes). */
  | { type: 'byte-sequence'; value: string }
  | { type: 'boolean'; value: boolean }
  /** Seconds since the epoch. */
  | { type: 'date'; value: number };

export type SfParameters = Map<string, SfBareItem>;
export interface SfItem {
  value: SfBareItem;
  params: SfParameters;
}
export interface SfInnerList {
  items: SfItem[];
  params: SfParameters;
}
export type SfMember = SfItem | SfInnerList;

/** A field value that is not a valid Structured Field of the type asked for. */
export class SfParseError extends Error {
  constructor(message: string, at: number) {
    super(`${message} at ${at}`);
    this.name = 'SfParseError';
  }
}

/** Parses a List field (RFC 9651 §4.2.1); throws {@link SfParseError} when any part is invalid. */
export function parseSfList(field: string): SfMember[] {
  return parseTopLevel(field, (p) => p.list());
}

/** Parses a Dictionary field (RFC 9651 §4.2.2); a key seen twice keeps its last value, in its first place. */
export function parseSfDictionary(field: string): Map<string, SfMember> {
  return parseTopLevel(field, (p) => p.dictionary());
}

function parseTopLevel<T>(field: string, parse: (parser: Parser) => T): T {
  const parser = new Parser(field);
  parser.skip(SP);
  const value = parse(parser);
  parser.skip(SP);
  if (!parser.done()) throw parser.fail('unexpected character');
  return value;
}

const SP = /[ ]/;
const OWS = /[ \t]/;
const DIGIT = /[0-9]/;
const ALPHA = /[A-Za-z]/;
const LCALPHA = /[a-z]/;
const KEY_CHAR = /[a-z0-9_\-.*]/;
/** tchar (RFC 9110 §5.6.2) plus ':' and '/', as sf-token allows. */
const TOKEN_CHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z:/]/;
const BASE64_CHAR = /[A-Za-z0-9+/=]/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const LCHEX = /[0-9a-f]/;

class Parser {
  private at = 0;

  constructor(private readonly input: string) {}

  done(): boolean {
    return this.at >= this.input.length;
  }

  fail(message: string): SfParseError {
    return new SfParseError(message, this.at);
  }

  skip(chars: RegExp): void {
    while (!this.done() && chars.test(this.input[this.at])) this.at++;
  }

  list(): SfMember[] {
    const members: SfMember[] = [];
    while (!this.done()) {
      members.push(this.itemOrInnerList());
      if (this.separator()) return members;
    }
    return members;
  }

  dictionary(): Map<string, SfMember> {
    const members = new Map<string, SfMember>();
    while (!this.done()) {
      const key = this.key();
      let member: SfMember;
      if (this.input[this.at] === '=') {
        this.at++;
        member = this.itemOrInnerList();
      } else {
        member = { value: { type: 'boolean', value: true }, params: this.parameters() };
      }
      members.set(key, member);
      if (this.separator()) return members;
    }
    return members;
  }

  /** After a member: true at the end of input, false after a comma that another member must follow. */
  private separator(): boolean {
    this.skip(OWS);
    if (this.done()) return true;
    if (this.input[this.at] !== ',') throw this.fail("expected ','");
    this.at++;
    this.skip(OWS);
    if (this.done()) throw this.fail('trailing comma');
    return false;
  }

  private itemOrInnerList(): SfMember {
    return this.input[this.at] === '(' ? this.innerList() : this.item();
  }

  private innerList(): SfInnerList {
    this.at++;
    const items: SfItem[] = [];
    while (!this.done()) {
      this.skip(SP);
      if (this.input[this.at] === ')') {
        this.at++;
        return { items, params: this.parameters() };
      }
      items.push(this.item());
      const next = this.input[this.at];
      if (next !== ' ' && next !== ')') throw this.fail("expected ' ' or ')' in an inner list");
    }
    throw this.fail('unterminated inner list');
  }

  private item(): SfItem {
    return { value: this.bareItem(), params: this.parameters() };
  }

  private parameters(): SfParameters {
    const params: SfParameters = new Map();
    while (this.input[this.at] === ';') {
      this.at++;
      this.skip(SP);
      const key = this.key();
      let value: SfBareItem = { type: 'boolean', value: true };
      if (this.input[this.at] === '=') {
        this.at++;
        value = this.bareItem();
      }
      params.set(key, value);
    }
    return params;
  }

  private key(): string {
    const first = this.input[this.at];
    if (first === undefined || !(LCALPHA.test(first) || first === '*')) throw this.fail('expected a key');
    const start = this.at;
    this.skip(KEY_CHAR);
    return this.input.slice(start, this.at);
  }

  private bareItem(): SfBareItem {
    const c = this.input[this.at];
    if (c === undefined) throw this.fail('expected an item');
    if (c === '-' || DIGIT.test(c)) return this.number();
    if (c === '"') return { type: 'string', value: this.string() };
    if (c === '*' || ALPHA.test(c)) return this.token();
    if (c === ':') return this.byteSequence();
    if (c === '?') return this.boolean();
    if (c === '@') return this.date();
    if (c === '%') return this.displayString();
    throw this.fail('unexpected character');
  }

  /** §4.2.4: at most 15 integer digits; a decimal has at most 12 before its point and 1 to 3 after. */
  private number(): SfBareItem {
    let sign = 1;
    if (this.input[this.at] === '-') {
      sign = -1;
      this.at++;
    }
    const start = this.at;
    if (this.done() || !DIGIT.test(this.input[this.at])) throw this.fail('expected a digit');
    this.skip(DIGIT);
    const whole = this.at - start;
    if (this.input[this.at] !== '.') {
      if (whole > 15) throw this.fail('integer too long');
      return { type: 'integer', value: sign * Number(this.input.slice(start, this.at)) };
    }
    if (whole > 12) throw this.fail('decimal too long');
    this.at++;
    const fractionStart = this.at;
    this.skip(DIGIT);
    const fraction = this.at - fractionStart;
    if (fraction === 0 || fraction > 3) throw this.fail('a decimal needs 1 to 3 fractional digits');
    return { type: 'decimal', value: sign * Number(this.input.slice(start, this.at)) };
  }

  private string(): string {
    this.at++;
    let value = '';
    while (!this.done()) {
      const c = this.input[this.at++];
      if (c === '\\') {
        const escaped = this.input[this.at++];
        if (escaped !== '"' && escaped !== '\\') throw this.fail('invalid escape');
        value += escaped;
      } else if (c === '"') {
        return value;
      } else if (c < ' ' || c > '~') {
        throw this.fail('invalid character in a string');
      } else {
        value += c;
      }
    }
    throw this.fail('unterminated string');
  }

  private token(): SfBareItem {
    const start = this.at++;
    this.skip(TOKEN_CHAR);
    return { type: 'token', value: this.input.slice(start, this.at) };
  }

  /** §4.2.7: base64 that decodes; padding may be left out (as §4.2.7 asks parsers to accept), not misplaced. */
  private byteSequence(): SfBareItem {
    const start = ++this.at;
    this.skip(BASE64_CHAR);
    if (this.input[this.at] !== ':') throw this.fail('unterminated byte sequence');
    const value = this.input.slice(start, this.at);
    const padded = value.includes('=');
    if (!BASE64.test(value) || (padded ? value.length % 4 !== 0 : value.length % 4 === 1)) throw this.fail('invalid base64');
    this.at++;
    return { type: 'byte-sequence', value };
  }

  private boolean(): SfBareItem {
    const c = this.input[++this.at];
    if (c !== '0' && c !== '1') throw this.fail('a boolean is ?0 or ?1');
    this.at++;
    return { type: 'boolean', value: c === '1' };
  }

  private date(): SfBareItem {
    this.at++;
    const n = this.number();
    if (n.type !== 'integer') throw this.fail('a date is an integer');
    return { type: 'date', value: n.value };
  }

  /** §4.2.10: printable ASCII except '"' and '%', or '%' and two lowercase hex digits; valid UTF-8 once decoded. */
  private displayString(): SfBareItem {
    if (this.input[++this.at] !== '"') throw this.fail("expected '\"' after '%'");
    this.at++;
    const bytes: number[] = [];
    while (!this.done()) {
      const c = this.input[this.at++];
      if (c < ' ' || c > '~') throw this.fail('invalid character in a display string');
      if (c === '"') return { type: 'display-string', value: decodeUtf8(bytes, this) };
      if (c !== '%') {
        bytes.push(c.charCodeAt(0));
        continue;
      }
      const hex = this.input.slice(this.at, this.at + 2);
      if (hex.length !== 2 || !LCHEX.test(hex[0]) || !LCHEX.test(hex[1])) throw this.fail('invalid percent-encoding');
      bytes.push(parseInt(hex, 16));
      this.at += 2;
    }
    throw this.fail('unterminated display string');
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

function decodeUtf8(bytes: number[], parser: Parser): string {
  try {
    return UTF8.decode(new Uint8Array(bytes));
  } catch {
    throw parser.fail('a display string that is not UTF-8');
  }
}
