import type { ExecutionContext } from '@nestjs/common';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitTracker } from '../interfaces/policy.interface';
import { clientIpKey } from './client-ip';
import type { HttpExchange } from './http-exchange';

/**
 * Whose quota a request draws from, as the string the counters are keyed by:
 * - `'ip'` → `ip:<address>` (IPv6 grouped by `ipv6Subnet`);
 * - `'user'` → `user:<id>` (`req.user.id`, else `req.user.sub`, else a string/number `req.user`), falling
 *   back to `ip:<address>` when the request is anonymous;
 * - a function → its value unchanged (so `RateLimiterService` calls with the same key reach the same
 *   counter); `undefined`, `null` or `''` fall back to `ip:<address>`.
 * The `ip:` and `user:` namespaces keep an address and a user id from ever sharing a counter.
 */
export async function resolveTracker(
  by: RateLimitTracker | undefined,
  context: ExecutionContext,
  exchange: HttpExchange,
  ipv6Subnet: number,
): Promise<string> {
  if (by === undefined || by === 'ip') return ipTracker(exchange, ipv6Subnet);
  if (by === 'user') return userTracker(exchange.request.user) ?? ipTracker(exchange, ipv6Subnet);
  const value: unknown = await by(context);
  if (value === undefined || value === null || value === '') return ipTracker(exchange, ipv6Subnet);
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  if (typeof value !== 'string') {
    throw new RateLimitConfigError(
      `by: the tracker function returned ${describe(value)}; it must return a string (or undefined to fall back to the client IP).`,
    );
  }
  return value;
}

/** `ip:<address>` for the framework's `req.ip`; `ip:unknown` when the socket is already gone. */
export function ipTracker(exchange: HttpExchange, ipv6Subnet: number): string {
  const ip = exchange.ip;
  return `ip:${ip ? clientIpKey(ip, ipv6Subnet) : 'unknown'}`;
}

function userTracker(user: unknown): string | undefined {
  if (typeof user === 'string' || typeof user === 'number') return user === '' ? undefined : `user:${user}`;
  if (user === null || typeof user !== 'object') return undefined;
  const { id, sub } = user as { id?: unknown; sub?: unknown };
  const value = id ?? sub;
  return (typeof value === 'string' && value !== '') || typeof value === 'number' ? `user:${value}` : undefined;
}

function describe(value: unknown): string {
  return typeof value === 'object' ? Object.prototype.toString.call(value) : `${typeof value} ${String(value)}`;
}
