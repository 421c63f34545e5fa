import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { Duration } from '../interfaces/policy.interface';
import type { RateLimitLease } from '../interfaces/service.interface';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { RateLimitEngine } from '../pipeline/rate-limit.engine';
import type { RateLimitCall } from '../stores/store.interface';
import { Verdict } from '../stores/verdicts';
import { resolveParams, type CompiledPolicy } from '../policy/compile-policy';
import { parseDuration } from '../policy/duration';

/**
 * The handle of a lease the engine decided on (`calls` took it when `decision` allowed). `assertOpen` throws
 * once the service has closed, so a renewal in flight when the app shuts down is never reported as held.
 */
export function leaseOf(
  engine: RateLimitEngine,
  compiled: CompiledPolicy,
  decision: RateLimitDecision,
  calls: readonly RateLimitCall[],
  assertOpen: () => void,
): RateLimitLease {
  let released = !decision.allowed;
  return {
    decision,
    release: async () => {
      if (released) return;
      released = true;
      await engine.refund(calls);
    },
    extend: async (ms?: Duration) => {
      const renewal = renewalOf(calls[0], compiled, ms);
      return !released && renew(engine, renewal, assertOpen);
    },
  };
}

/** Asks the store to renew a lease (see {@link RateLimitLease.extend}); true while it is held. */
async function renew(engine: RateLimitEngine, renewal: RateLimitCall, assertOpen: () => void): Promise<boolean> {
  assertOpen();
  // Straight to the store: a renewal is not a decision (no hook, no event), and it answers only "held?".
  const { verdicts } = await engine.store.decide([renewal], 'consume');
  assertOpen();
  if (verdicts[0].reason === Verdict.StoreUnavailable) {
    throw new RateLimitStoreError('lease.extend: the rate-limit store did not answer; whether the lease is still held is unknown.');
  }
  return verdicts[0].allowed;
}

/**
 * The call that renews the lease `call` took, to expire `ms` (default: its window) from the store's now: a
 * negative cost names the lease's units (see concurrency.lua). The lockout key it reads is never written.
 */
function renewalOf(call: RateLimitCall, compiled: CompiledPolicy, ms: Duration | undefined): RateLimitCall {
  const windowMs = ms === undefined ? call.params.windowMs : parseDuration(ms, 'lease.extend: ms');
  return leaseRenewal(call, resolveParams(compiled, call.params.limit, windowMs, 'lease.extend'));
}

/**
 * The call that renews the lease `call` took for `params.windowMs` from the store's now (a route's
 * heartbeat, `lease.extend()`): its units as a negative cost, no lockout, and no deny either — both stop new
 * leases, not the renewal of one held.
 */
export function leaseRenewal(call: RateLimitCall, params = call.params): RateLimitCall {
  return {
    ...call,
    cost: -call.cost,
    hold: 0,
    params,
    blockForMs: 0,
    escalate: undefined,
    blockKey: `${call.blockKey}:none`,
    denyKey: undefined,
    refundable: false,
  };
}
