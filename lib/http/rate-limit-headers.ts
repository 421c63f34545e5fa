import type { AlgorithmParams } from '../algorithms/algorithm.interface';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitHeadersMode } from '../interfaces/module-options.interface';
import { ceilDiv } from '../utils/math';

/**
 * One policy's `RateLimit-Policy` list member (draft-ietf-httpapi-ratelimit-headers-10):
 * `"<name>";q=<quota>;w=<window s>`. For bucket algorithms the quota is the capacity (`burst`) and the
 * window the time it takes to refill it, so `q / w` is always the sustained rate. `w` is whole seconds, ≥ 1.
 * @example policyMember('default', { limit: 100, windowMs: 60_000, burst: 100 }, false) // '"default";q=100;w=60'
 */
export function policyMember(name: string, { limit, windowMs, burst }: AlgorithmParams, usesBurst: boolean): string {
  const quota = usesBurst ? burst : limit;
  const windowS = Math.max(1, ceilDiv(usesBurst ? ceilDiv(burst * windowMs, limit) : windowMs, 1000));
  return `"${name}";q=${quota};w=${windowS}`;
}

/**
 * Whole seconds (rounded up) until the policy has more quota: on a rejection, until this request would be
 * allowed; otherwise until the quota is fully restored.
 */
export function secondsUntilMore(decision: RateLimitDecision): number {
  const ms = !decision.allowed && Number.isFinite(decision.retryAfterMs) ? decision.retryAfterMs : decision.resetMs;
  return ceilDiv(Math.max(Math.ceil(ms), 0), 1000);
}

/** One policy's `RateLimit` list member: `"<name>";r=<remaining>;t=<seconds>`. */
export function quotaMember(decision: RateLimitDecision): string {
  return `"${decision.policy}";r=${decision.remaining};t=${secondsUntilMore(decision)}`;
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

/** Writes the headers `mode` asks for; `policyHeader` holds one {@link policyMember} per decision, in order. */
export function writeRateLimitHeaders(
  exchange: HeaderSink,
  mode: RateLimitHeadersMode,
  policyHeader: string,
  decisions: readonly RateLimitDecision[],
): void {
  if (mode === 'none' || decisions.length === 0) return;
  if (mode === 'ietf' || mode === 'both') {
    exchange.setHeader('RateLimit-Policy', policyHeader);
    let quota = quotaMember(decisions[0]);
    for (let i = 1; i < decisions.length; i++) quota += `, ${quotaMember(decisions[i])}`;
    exchange.setHeader('RateLimit', quota);
  }
  if (mode === 'legacy' || mode === 'both') {
    const worst = mostRestrictive(decisions);
    exchange.setHeader('X-RateLimit-Limit', String(worst.limit));
    exchange.setHeader('X-RateLimit-Remaining', String(worst.remaining));
    exchange.setHeader('X-RateLimit-Reset', String(secondsUntilMore(worst)));
  }
}
