/**
 * What the app's optional-peer modules (fixture/extras-peers.ts) counted after one round of the consumer checks:
 * GET /limited three times (2 allowed, 1 rejected, policy "default") and GET /service (two consumes of policy
 * "service": 1 allowed, 1 rejected). Exempt routes decide nothing, so nothing else is counted.
 */
const EXPECTED_METRICS = [
  'rate_limit_allowed_total{policy="default",reason="counter"} 2',
  'rate_limit_allowed_total{policy="service",reason="counter"} 1',
  'rate_limit_decision_duration_seconds_count{outcome="allowed"} 3',
  'rate_limit_decision_duration_seconds_count{outcome="rejected"} 2',
  'rate_limit_rejected_total{policy="default",reason="counter"} 1',
  'rate_limit_rejected_total{policy="service",reason="counter"} 1',
];
/** `rate-limit.decision` once per decision, `rate-limit.rejected` once per rejecting one. */
const EXPECTED_EVENTS = { decision: 5, rejected: 2 };

/** prom-client's exposition at /metrics and @nestjs/event-emitter's counts at /events; each mismatch is one failure. */
export async function optionalPeerFailures(port: number): Promise<string[]> {
  const get = (path: string) => fetch(`http://127.0.0.1:${port}${path}`);
  const failures: string[] = [];
  const exposition = await (await get('/metrics')).text();
  const counted = exposition
    .split('\n')
    .filter((line) => /^rate_limit_(allowed_total|rejected_total|decision_duration_seconds_count)\{/.test(line))
    .sort();
  if (JSON.stringify(counted) !== JSON.stringify(EXPECTED_METRICS)) {
    failures.push(`GET /metrics (prom-client): got ${JSON.stringify(counted)}, expected ${JSON.stringify(EXPECTED_METRICS)}`);
  }
  const events = (await (await get('/events')).json()) as unknown;
  if (JSON.stringify(events) !== JSON.stringify(EXPECTED_EVENTS)) {
    failures.push(`GET /events (@nestjs/event-emitter): got ${JSON.stringify(events)}, expected ${JSON.stringify(EXPECTED_EVENTS)}`);
  }
  return failures;
}
