import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitCall } from '../stores/store.interface';

/**
 * Whether the store charged what `decision` allowed, so that a refund or a release may give it back. An answer
 * of the `fail-open` fallback took nothing anywhere; one of the `insurance` fallback took from the in-process
 * insurance store (and the store gives it back there, never to Redis).
 */
export function charged(decision: RateLimitDecision, call: RateLimitCall): boolean {
  return decision.allowed && (decision.reason !== 'store-unavailable' || call.fallback === 'insurance');
}

/** The store's time (ms) request `i` of a decision was decided, so charged, at. */
export function decidedAt({ nowMs }: { nowMs: number | readonly number[] }, i: number): number {
  return typeof nowMs === 'number' ? nowMs : nowMs[i];
}
