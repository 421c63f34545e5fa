import type { Attributes, Span } from '@opentelemetry/api';
import { policyOutcome, type RateLimitOutcome, type RateLimitVerdict } from '../events/decision-telemetry';
import type { RateLimitDecision } from '../interfaces/decision.interface';
import type { RateLimitDecisionEvent } from '../interfaces/module-options.interface';
import {
  ATTR_RATELIMIT_LIMIT,
  ATTR_RATELIMIT_OUTCOME,
  ATTR_RATELIMIT_POLICY,
  ATTR_RATELIMIT_REASON,
  ATTR_RATELIMIT_REMAINING,
  ATTR_RATELIMIT_RETRY_AFTER_MS,
  EVENT_RATELIMIT_NEAR_LIMIT,
  EVENT_RATELIMIT_REJECTED,
} from './semantic-conventions';

/**
 * Writes a decision on `span`: the deciding policy as attributes (a later decision in the same span, such
 * as a second GraphQL resolver's, overwrites them), and one `ratelimit.rejected` event per policy that
 * rejected, shadow and fallback rejections included.
 */
export function annotateDecision(span: Span, event: RateLimitDecisionEvent, { outcome, decision }: RateLimitVerdict): void {
  span.setAttributes(policyAttributes(decision, outcome));
  const { decisions } = event;
  for (let i = 0; i < decisions.length; i++) {
    if (!decisions[i].allowed) span.addEvent(EVENT_RATELIMIT_REJECTED, policyAttributes(decisions[i], policyOutcome(event, i)));
  }
}

/** Adds a `ratelimit.near_limit` event for an allowed decision near its policy's limit. */
export function annotateNearLimit(span: Span, decision: RateLimitDecision): void {
  span.addEvent(EVENT_RATELIMIT_NEAR_LIMIT, {
    [ATTR_RATELIMIT_POLICY]: decision.policy,
    [ATTR_RATELIMIT_LIMIT]: decision.limit,
    [ATTR_RATELIMIT_REMAINING]: decision.remaining,
  });
}

function policyAttributes(decision: RateLimitDecision, outcome: RateLimitOutcome): Attributes {
  const attributes: Attributes = {
    [ATTR_RATELIMIT_POLICY]: decision.policy,
    [ATTR_RATELIMIT_OUTCOME]: outcome,
    [ATTR_RATELIMIT_LIMIT]: decision.limit,
    [ATTR_RATELIMIT_REMAINING]: decision.remaining,
  };
  // 0 when allowed; Infinity (the cost can never fit) is no wait at all: the reason says why instead.
  if (Number.isFinite(decision.retryAfterMs)) attributes[ATTR_RATELIMIT_RETRY_AFTER_MS] = decision.retryAfterMs;
  if (decision.reason !== undefined) attributes[ATTR_RATELIMIT_REASON] = decision.reason;
  return attributes;
}
