import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { Duration } from '../interfaces/policy.interface';
import { describeValue } from '../shared/describe-value';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION_PATTERN = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;

/**
 * Converts a {@link Duration} to whole milliseconds. `field` names the option in the error message, which
 * also lists `alternative` when the field takes something else as well.
 * @example parseDuration('1m', 'window') // 60000
 */
export function parseDuration(value: Duration, field: string, alternative?: string): number {
  const ms = typeof value === 'number' ? value : fromString(value);
  if (ms === undefined || !Number.isFinite(ms) || !Number.isInteger(ms) || ms <= 0) {
    throw new RateLimitConfigError(
      `${field}: ${describeValue(value)} is not a valid duration; use a positive whole number of milliseconds ` +
        `or a string such as '250ms', '1s', '1m', '1h', '1d'${alternative === undefined ? '' : `, or ${alternative}`}.`,
    );
  }
  return ms;
}

function fromString(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const match = DURATION_PATTERN.exec(value.trim());
  return match ? Number(match[1]) * UNIT_MS[match[2]] : undefined;
}
