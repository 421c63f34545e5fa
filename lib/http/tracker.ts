import type { ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitTracker } from '../interfaces/policy.interface';
import { describeValue } from '../utils/describe-value';
import { StringMemo } from '../utils/string-memo';
import { clientIpKey } from './client-ip';

/** Who is calling, as one kind of execution context (HTTP, GraphQL, WebSocket, RPC) sees it. */
export interface TrackerSource {
  /**
   * The context's own default tracker, used for `'ip'`, for a policy without `by`, and when a tracker
   * function returns nothing: `ip:<address>` where there is a client address.
   */
  defaultTracker(ips: IpTrackers): string;
  /** The authenticated user for `by: 'user'`; `undefined` when anonymous or when the context has none. */
  readonly user: unknown;
}

/**
 * Whose quota a call draws from, as the string the counters are keyed by:
 * - `'ip'` or no `by` → the context's default (HTTP: `ip:<address>`, IPv6 grouped by `ipv6Subnet`);
 * - `'user'` → `user:<id>` (`user.id`, else `user.sub`, else a string/number user), falling back to the
 *   context's default when the call is anonymous;
 * - a function → its value unchanged (so `RateLimiterService` calls with the same key reach the same
 *   counter); `undefined`, `null` or `''` fall back to the context's default.
 * The `ip:` and `user:` namespaces keep an address and a user id from ever sharing a counter.
 */
export async function resolveTracker(
  by: RateLimitTracker | undefined,
  context: ExecutionContext,
  source: TrackerSource,
  ips: IpTrackers,
): Promise<string> {
  if (typeof by !== 'function') return knownTracker(by, source, ips);
  const value: unknown = await by(context);
  if (value === undefined || value === null || value === '') return source.defaultTracker(ips);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value !== 'string') {
    throw new RateLimitConfigError(
      `by: the tracker function returned ${describeValue(value)}; it must return a string (or undefined to fall back to the default tracker).`,
    );
  }
  return value;
}

/** The tracker of `'ip'`, `'user'` or no `by`, which needs no waiting (see {@link resolveTracker}). */
export function knownTracker(by: 'ip' | 'user' | undefined, source: TrackerSource, ips: IpTrackers): string {
  if (by === 'user') return userTracker(source.user) ?? source.defaultTracker(ips);
  return source.defaultTracker(ips);
}

/**
 * The `ip:` tracker of a client address: `ip:<address>`, IPv6 grouped by `ipv6Subnet`, `ip:unknown` when
 * there is no address (the socket is gone). Remembered for recent addresses: a connection hands every one
 * of its requests the same address string, so the tracker (and its hash) is built once, not per request.
 * Behind a trusted proxy the address comes from X-Forwarded-For, which the client writes: the memo keeps
 * only its own copies of short strings (see {@link StringMemo}).
 */
export class IpTrackers {
  private readonly trackers: StringMemo<string>;

  constructor(readonly ipv6Subnet: number) {
    this.trackers = new StringMemo((address) => `ip:${clientIpKey(address, ipv6Subnet)}`);
  }

  of(address: string | undefined): string {
    return address ? this.trackers.get(address) : 'ip:unknown';
  }
}

function userTracker(user: unknown): string | undefined {
  if (typeof user === 'string' || typeof user === 'number') return user === '' ? undefined : `user:${user}`;
  if (user === null || typeof user !== 'object') return undefined;
  const { id, sub } = user as { id?: unknown; sub?: unknown };
  const value = id ?? sub;
  return (typeof value === 'string' && value !== '') || typeof value === 'number' ? `user:${value}` : undefined;
}
