import { isIP } from 'node:net';
import type { ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitTracker } from '../interfaces/policy.interface';
import { describeValue } from '../shared/describe-value';
import { StringMemo } from '../shared/string-memo';
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
  /**
   * Where {@link user} is read from, for the warning about a `by: 'user'` call without one (`req.user`);
   * `undefined` where `'user'` has no meaning (a microservice message, which has no user).
   */
  readonly userSource?: string;
}

/**
 * Whose quota a call draws from, as the string the counters are keyed by:
 * - `'ip'` or no `by` → the context's default (HTTP: `ip:<address>`, IPv6 grouped by `ipv6Subnet`);
 * - `'user'` → `user:<id>` (`user.id`, else `user.sub`, else a string/number user), falling back to the
 *   context's default when the call is anonymous;
 * - a function → `by:<value>` (a number as its string); `undefined`, `null` or `''` fall back to the
 *   context's default.
 * Each kind has its own namespace, so no value a request controls (a header, a body field read by `by`) can
 * reach the counter of an address, of a user or of another context's default: a `by` function returning
 * `'ip:127.0.0.1'` counts under `by:ip:127.0.0.1`.
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
  if (typeof value === 'number' && Number.isFinite(value)) return byTracker(String(value));
  if (typeof value !== 'string') {
    throw new RateLimitConfigError(
      `by: the tracker function returned ${describeValue(value)}; it must return a string (or undefined to fall back to the default tracker).`,
    );
  }
  return byTracker(value);
}

/** The tracker of a value a `by` function returns: in its own namespace, `by:<value>`. */
function byTracker(value: string): string {
  return `by:${value}`;
}

/** The tracker of `'ip'`, `'user'` or no `by`, which needs no waiting (see {@link resolveTracker}). */
export function knownTracker(by: 'ip' | 'user' | undefined, source: TrackerSource, ips: IpTrackers): string {
  if (by === 'user') return userTracker(source.user) ?? source.defaultTracker(ips);
  return source.defaultTracker(ips);
}

/**
 * The `user:` tracker of the call's user: `user:<id>` from `user.id`, else `user.sub`, else a string or number
 * user; `undefined` when the call is anonymous (no user, or one with none of these).
 */
export function userTracker(user: unknown): string | undefined {
  if (typeof user === 'string' || typeof user === 'number') return user === '' ? undefined : `user:${user}`;
  if (user === null || typeof user !== 'object') return undefined;
  const { id, sub } = user as { id?: unknown; sub?: unknown };
  const value = id ?? sub;
  return (typeof value === 'string' && value !== '') || typeof value === 'number' ? `user:${value}` : undefined;
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

/** Namespaces a {@link serviceTracker} key may name as they are (`ip:` is normalised first). */
const NAMED = ['user:', 'rpc:', 'by:'] as const;

/**
 * The tracker a `RateLimiterService` key names, so a service call reaches the counter the guard keeps for
 * the same client:
 * - `ip:<address>` → the client at that address, normalised as the guard does (IPv6 grouped by
 *   `ipv6Subnet`, IPv4-mapped IPv6 as IPv4); the guard's own form of a group (`ip:2001:db8:0:0::/64`) and
 *   `ip:unknown` (a request whose socket is gone) as written;
 * - `user:<id>`, `rpc:<…>` → those built-in trackers as written;
 * - `by:<value>` → the tracker of a `by` function returning `<value>` (the way to name a value that itself
 *   starts with one of these prefixes);
 * - a bare IP address → refused: it is unclear whether the client at that address or a `by` value is meant;
 * - any other key → the tracker of a `by` function returning it, `by:<key>`.
 * A key that breaks these rules throws a {@link RateLimitConfigError} saying what to write.
 * @example serviceTracker('acme', 64) // 'by:acme', the counter of a route whose `by` returns 'acme'
 * @example serviceTracker('ip:2001:db8::1', 64) // 'ip:2001:db8:0:0::/64'
 */
export function serviceTracker(key: string, ipv6Subnet: number): string {
  if (key.startsWith('ip:')) return ipTracker(key, ipv6Subnet);
  for (const namespace of NAMED) {
    if (key.startsWith(namespace)) {
      if (key.length > namespace.length) return key;
      throw new RateLimitConfigError(
        `key: ${describeValue(key)} names the ${namespace} namespace but no value; write the value after '${namespace}' (such as '${namespace}42').`,
      );
    }
  }
  if (mayBeIp(key) && isIP(key) !== 0) {
    throw new RateLimitConfigError(
      `key: ${describeValue(key)} is a bare IP address, which names no tracker: write 'ip:${key}' for the client at that address, or 'by:${key}' for a value your by function returns.`,
    );
  }
  return byTracker(key);
}

/**
 * Whether `key` could be an IP address at all: an IPv4 address starts with a digit and every IPv6 address has
 * a colon. Most keys are neither, and this costs less than `isIP`'s two regular expressions, once per new key.
 */
function mayBeIp(key: string): boolean {
  const first = key.charCodeAt(0);
  return (first >= 48 && first <= 57) || key.includes(':');
}

/** The `ip:` tracker a service key names (see {@link serviceTracker}). */
function ipTracker(key: string, ipv6Subnet: number): string {
  const address = key.slice(3);
  if (address === 'unknown') return key;
  const slash = address.indexOf('/');
  const bare = slash < 0 ? address : address.slice(0, slash);
  const family = isIP(bare);
  if (family === 0) {
    throw new RateLimitConfigError(
      `key: ${describeValue(key)}: ${describeValue(bare)} is not an IP address; write 'ip:' before an IPv4 or IPv6 address (such as 'ip:203.0.113.7'), or 'by:${key}' for a value your by function returns.`,
    );
  }
  if (slash >= 0 && (family !== 6 || address.slice(slash + 1) !== String(ipv6Subnet) || ipv6Subnet === 128)) {
    throw new RateLimitConfigError(
      `key: ${describeValue(key)}: the guard keys IPv6 clients by their /${ipv6Subnet} (ipv6Subnet) and IPv4 clients by their address; write the client's address (such as 'ip:${bare}').`,
    );
  }
  return `ip:${clientIpKey(bare, ipv6Subnet)}`;
}
