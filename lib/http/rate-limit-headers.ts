import type { AlgorithmParams, RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitHeadersMode } from '../interfaces/module-options.interface';
import type { RateLimitQuotaUnit } from '../interfaces/policy.interface';
import { ceilDiv } from '../shared/math';
import type { DecidedPolicy, RateLimitHeaderProfile } from './header-profiles';

/** Largest whole number a Structured Field integer may hold (RFC 9651 §3.3.1). */
const MAX_SF_INTEGER = 999_999_999_999_999;

/**
 * One policy's `RateLimit-Policy` list member (draft-ietf-httpapi-ratelimit-headers-10).
 *
 * Rate policies: `"<name>";q=<quota>;w=<window s>`, with `q / w` exactly the policy's rate. `w` must be
 * whole seconds, so a window that is not (250 ms, 1.5 s) is stated over the shortest whole number of
 * seconds spanning a whole number of windows, its quota scaled to match: 5 per 250 ms is `q=20;w=1`, 3 per
 * 700 ms `q=30;w=7`, 1 per 1500 ms `q=2;w=3`. A window of whole seconds is sent as it is (`q=100;w=60`);
 * a calendar window as its current period (`w=82800` on a 23-hour day: its `windowMs` is that period's length).
 * Bucket algorithms state their capacity (`burst`) and the time it takes to refill it, scaled the same
 * way when that time is not whole seconds.
 *
 * `concurrency`: `"<name>";q=<limit>;qu="concurrent-requests"`, with no `w`: the quota bounds the requests
 * in flight at any instant, over no window (the policy's `window` is only how long a lost lease lives, and
 * `w` would read as a rate of `q` per `w`).
 *
 * Another `quotaUnit` than the draft's default (`requests`) is sent as `qu`, e.g. `"dl";q=1000000;w=60;qu="content-bytes"`.
 * @example policyMember('default', { limit: 100, windowMs: 60_000, burst: 100 }, { name: 'fixed-window', usesBurst: false }) // '"default";q=100;w=60'
 */
export function policyMember(
  name: string,
  { limit, windowMs, burst }: AlgorithmParams,
  algorithm: Pick<RateLimitAlgorithm, 'name' | 'usesBurst'>,
  quotaUnit: RateLimitQuotaUnit = 'requests',
): string {
  if (algorithm.name === 'concurrency') return `"${name}";q=${limit};qu="concurrent-requests"`;
  // A fixed window sends its limit per window; a sub-second one (5 per 250 ms: q=20;w=1) sends the same
  // average rate over whole windows, which is also the most it can ever allow within a window-aligned `w`.
  const quota = algorithm.usesBurst ? burst : limit;
  const { quota: q, seconds: w } = wholeSecondsPeriod(quota, windowMs, limit);
  return quotaUnit === 'requests' ? `"${name}";q=${q};w=${w}` : `"${name}";q=${q};w=${w};qu="${quotaUnit}"`;
}

/**
 * `quota` units are restored every `quota * windowMs / limit` ms; stated over the fewest whole seconds
 * holding a whole number `k` of such periods: `k * quota` per `seconds`. The fraction
 * `quota * windowMs / (1000 * limit)` is reduced factor by factor so that no product grows past what it must.
 */
function wholeSecondsPeriod(quota: number, windowMs: number, limit: number): { quota: number; seconds: number } {
  const a = gcd(quota, limit);
  const b = gcd(windowMs, 1000);
  let [qn, ld, wn, td] = [quota / a, limit / a, windowMs / b, 1000 / b];
  const c = gcd(qn, td);
  const d = gcd(wn, ld);
  [qn, td, wn, ld] = [qn / c, td / c, wn / d, ld / d];
  const seconds = qn * wn;
  const scaled = quota * ld * td;
  if (seconds <= MAX_SF_INTEGER && scaled <= MAX_SF_INTEGER) return { quota: scaled, seconds };
  // Only with absurd numbers: keep the quota and round the period up rather than send an invalid field.
  return { quota, seconds: Math.min(MAX_SF_INTEGER, Math.max(1, Math.ceil((quota * windowMs) / limit / 1000))) };
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b];
  return a;
}

/**
 * `X-RateLimit-Reset`, as legacy clients read it: whole seconds (rounded up) until the quota is fully
 * restored, or on a rejection until this request would be allowed.
 */
export function secondsUntilReset(decision: RateLimitDecision): number {
  const ms = !decision.allowed && Number.isFinite(decision.retryAfterMs) ? decision.retryAfterMs : decision.resetMs;
  return ceilDiv(Math.max(Math.ceil(ms), 0), 1000);
}

/**
 * Whether `decision` rejected the call: what `Retry-After` waits for and `violated-policies` names (a shadow
 * policy that would have rejected did not).
 */
export function isViolated(decision: RateLimitDecision): boolean {
  return !decision.allowed && decision.reason !== 'shadow';
}

/**
 * The decision the legacy headers describe: a rejecting one with the longest wait, else the one with the
 * fewest units left (the later reset on a tie).
 */
export function mostRestrictive(decisions: readonly RateLimitDecision[]): RateLimitDecision {
  return decisions.reduce((worst, d) => {
    if (!d.allowed !== !worst.allowed) return d.allowed ? worst : d;
    if (!d.allowed) return d.retryAfterMs > worst.retryAfterMs ? d : worst;
    if (d.remaining !== worst.remaining) return d.remaining < worst.remaining ? d : worst;
    return d.resetMs > worst.resetMs ? d : worst;
  });
}

/**
 * `Retry-After` seconds for a rejection: the longest wait among the rejecting decisions, rounded up;
 * `null` when one of them can never be allowed (its cost exceeds the policy's capacity).
 */
export function retryAfterSeconds(rejecting: readonly RateLimitDecision[]): number | null {
  let ms = 0;
  for (const d of rejecting) if (d.retryAfterMs > ms) ms = d.retryAfterMs;
  return Number.isFinite(ms) ? ceilDiv(Math.ceil(ms), 1000) : null;
}

/** Where headers go: the HTTP response of the call, or nowhere (WebSocket and RPC calls have none). */
export interface HeaderSink {
  setHeader(name: string, value: string): void;
}

/** What {@link writeRateLimitHeaders} writes. */
export interface RateLimitHeadersInput {
  mode: RateLimitHeadersMode;
  /** How the `RateLimit` field reads (module option `headerProfile`). */
  profile: RateLimitHeaderProfile;
  /** One {@link policyMember} per decision, in order. */
  policyHeader: string;
  decisions: readonly RateLimitDecision[];
  /** The policy behind each decision, in the same order. */
  policies: readonly DecidedPolicy[];
}

/**
 * Writes the headers `mode` asks for; `policyHeader` holds one {@link policyMember} per decision, in order
 * (the caller leaves out the policies clients must not see, such as shadow ones). A decision the store did
 * not make (`reason: 'store-unavailable'`: `onStoreError` answered) has no `RateLimit` member and is not
 * described by the legacy headers, as its quota is not the client's real one; its `RateLimit-Policy` member
 * stays, since it states the configured policy, which is still true, and lets the field stay a constant.
 * On a rejection, a profile that lists only the violated policies leaves the others out of `RateLimit`.
 */
export function writeRateLimitHeaders(
  exchange: HeaderSink,
  { mode, profile, policyHeader, decisions, policies }: RateLimitHeadersInput,
): void {
  if (mode === 'none' || decisions.length === 0) return;
  let unknown = 0;
  for (const d of decisions) if (d.reason === 'store-unavailable') unknown++;
  if (mode === 'ietf' || mode === 'both') {
    exchange.setHeader('RateLimit-Policy', policyHeader);
    const quota = quotaField(profile, decisions, policies);
    if (quota !== '') exchange.setHeader('RateLimit', quota);
  }
  if ((mode === 'legacy' || mode === 'both') && unknown < decisions.length) {
    const worst = mostRestrictive(unknown === 0 ? decisions : decisions.filter((d) => d.reason !== 'store-unavailable'));
    exchange.setHeader('X-RateLimit-Limit', String(worst.limit));
    exchange.setHeader('X-RateLimit-Remaining', String(worst.remaining));
    exchange.setHeader('X-RateLimit-Reset', String(secondsUntilReset(worst)));
  }
}

/** The `RateLimit` value: the profile's member of each decision it lists; `''` when none is. */
function quotaField(profile: RateLimitHeaderProfile, decisions: readonly RateLimitDecision[], policies: readonly DecidedPolicy[]): string {
  const violatedOnly = profile.violatedOnly && decisions.some(isViolated);
  let quota = '';
  for (let i = 0; i < decisions.length; i++) {
    const d = decisions[i];
    if (d.reason === 'store-unavailable' || (violatedOnly && !isViolated(d))) continue;
    const member = profile.quotaMember(d, policies[i]);
    quota = quota === '' ? member : `${quota}, ${member}`;
  }
  return quota;
}
