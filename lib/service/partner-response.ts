import { parseHttpDate } from '../http/http-date';
import { parseSfDictionary, parseSfList, type SfMember } from '../http/structured-fields';
import type { PartnerPauseOptions } from '../interfaces/service.interface';

export type { PartnerPauseOptions };

/**
 * Response headers as HTTP clients give them: a WHATWG `Headers` (fetch, undici) or anything else with a
 * `get(name)` (axios's `AxiosHeaders`), or a plain object of name → value (node:http, got, `undici.request`),
 * names in any case. A value may be a string, a number or an array of strings (joined with `, `).
 */
export type PartnerHeaders = { get(name: string): unknown } | { readonly [name: string]: unknown };

/**
 * A partner's response as HTTP clients give it: fetch's `Response`, an axios or got response (also the
 * `response` of the error they throw for a 4xx), undici's `request()` result, node's `IncomingMessage`.
 */
export interface PartnerResponse {
  /** The status code (fetch, axios). */
  status?: number;
  /** The status code (node:http, got, undici `request()`), read when `status` is absent. */
  statusCode?: number;
  headers: PartnerHeaders;
}

/** The default of {@link PartnerPauseOptions.maxPause}: one day. */
export const DEFAULT_MAX_PAUSE_MS = 86_400_000;

/** Longest field value read: a longer one is ignored, so a partner cannot make the parsing work grow. */
const MAX_FIELD_CHARS = 4_096;
/** Below this, a legacy reset is seconds from now (1e9 s is 31 years); from it, an epoch timestamp. */
const EPOCH_SECONDS_FROM = 1e9;
/** From this on, an epoch reset is in ms (1e12 s would be the year 33658). */
const EPOCH_MS_FROM = 1e12;
const DECIMAL = /^\d+(?:\.\d+)?$/;
const DELTA_SECONDS = /^\d+$/;

/**
 * How long, in ms, a partner's response asks its caller to wait before calling again: 0 when it does not
 * say, at most `maxMs`. Reads, in this order, and the first field present and valid decides (a field that is
 * absent, in the past or not valid is ignored):
 * 1. `Retry-After` on a 429 or a 503 (RFC 9110 §10.2.3): delta-seconds, or an HTTP-date counted from the
 *    response's `Date` when it has a valid one (both are the partner's clock), else from `now`. The ratelimit
 *    draft gives it precedence over its own fields.
 * 2. `RateLimit` (draft-ietf-httpapi-ratelimit-headers, a Structured Field List): the longest `t` seconds among
 *    the policies with `r=0`; 0 when every policy has quota left. The Dictionary form of older drafts
 *    (`limit=100, remaining=0, reset=30`) is read the same way.
 * 3. `X-RateLimit-Remaining: 0` with `X-RateLimit-Reset`, or the unprefixed `RateLimit-Remaining` /
 *    `RateLimit-Reset` of drafts 00–06: a reset below 1e9 is seconds from now; from 1e9 it is an epoch
 *    timestamp in seconds (1e9 s is 2001-09-09; no quota resets 31 years ahead), from 1e12 in ms.
 * @example pauseAskedMs({ status: 429, headers: { 'retry-after': '30' } }, DEFAULT_MAX_PAUSE_MS) // 30000
 */
export function pauseAskedMs(response: PartnerResponse, maxMs: number, now = Date.now()): number {
  const headers = response.headers;
  const status = response.status ?? response.statusCode;
  const date = field(headers, 'date');
  const partnerNow = (date !== undefined ? parseHttpDate(date, now) : undefined) ?? now;
  const ms =
    (status === 429 || status === 503 ? retryAfterMs(field(headers, 'retry-after'), partnerNow, now) : undefined) ??
    rateLimitFieldMs(field(headers, 'ratelimit')) ??
    legacyResetMs(headers, 'x-ratelimit-', partnerNow) ??
    legacyResetMs(headers, 'ratelimit-', partnerNow) ??
    0;
  return Math.min(Math.ceil(ms), maxMs);
}

/** `Retry-After`: delta-seconds, or an HTTP-date still ahead of the partner's now. */
function retryAfterMs(value: string | undefined, partnerNow: number, now: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (DELTA_SECONDS.test(text)) return Number(text) * 1000;
  const at = parseHttpDate(text, now);
  return at !== undefined && at > partnerNow ? at - partnerNow : undefined;
}

/** The `RateLimit` field: the longest `t` among policies with `r=0`, 0 when all have quota; undefined when it says neither. */
function rateLimitFieldMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  let members: SfMember[];
  try {
    members = parseSfList(value);
  } catch {
    return dictionaryFormMs(value);
  }
  let said = false;
  let longest = 0;
  for (const member of members) {
    if (!('value' in member)) continue;
    const r = member.params.get('r');
    const t = member.params.get('t');
    if (r?.type !== 'integer' || r.value < 0) continue;
    said = true;
    if (r.value === 0 && t?.type === 'integer' && t.value >= 0) longest = Math.max(longest, t.value * 1000);
  }
  return said ? longest : undefined;
}

/** Older drafts' `RateLimit: limit=100, remaining=0, reset=30` (a Dictionary). */
function dictionaryFormMs(value: string): number | undefined {
  let members: Map<string, SfMember>;
  try {
    members = parseSfDictionary(value);
  } catch {
    return undefined;
  }
  const remaining = members.get('remaining');
  const reset = members.get('reset');
  if (!remaining || !('value' in remaining) || remaining.value.type !== 'integer' || remaining.value.value < 0) return undefined;
  if (remaining.value.value > 0) return 0;
  return reset && 'value' in reset && reset.value.type === 'integer' && reset.value.value >= 0 ? reset.value.value * 1000 : undefined;
}

/** `<prefix>remaining: 0` with `<prefix>reset`: seconds from now, or an epoch timestamp (see {@link pauseAskedMs}). */
function legacyResetMs(headers: PartnerHeaders, prefix: string, partnerNow: number): number | undefined {
  const remaining = field(headers, `${prefix}remaining`)?.trim();
  const reset = field(headers, `${prefix}reset`)?.trim();
  if (remaining === undefined || !DECIMAL.test(remaining)) return undefined;
  if (Number(remaining) > 0) return 0;
  if (reset === undefined || !DECIMAL.test(reset)) return undefined;
  const n = Number(reset);
  if (n < EPOCH_SECONDS_FROM) return n * 1000;
  const ms = (n < EPOCH_MS_FROM ? n * 1000 : n) - partnerNow;
  return ms > 0 ? ms : undefined;
}

/** One header's value as a string, whatever shape the client gives headers in; undefined when absent or too long. */
function field(headers: PartnerHeaders, name: string): string | undefined {
  const raw = typeof headers.get === 'function' ? (headers as { get(name: string): unknown }).get(name) : plainField(headers, name);
  const value = typeof raw === 'number' ? String(raw) : Array.isArray(raw) ? raw.filter((v) => typeof v === 'string').join(', ') : raw;
  return typeof value === 'string' && value.length <= MAX_FIELD_CHARS ? value : undefined;
}

/** A plain object's header, its name in any case (clients lowercase names; a hand-made object may not). */
function plainField(headers: { readonly [name: string]: unknown }, name: string): unknown {
  if (Object.hasOwn(headers, name)) return headers[name];
  for (const key of Object.keys(headers)) if (key.toLowerCase() === name) return headers[key];
  return undefined;
}
