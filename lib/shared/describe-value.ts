/**
 * A value as the user wrote it, for error messages: `NaN`, `Infinity`, `undefined` and functions stay
 * recognisable (JSON.stringify would print `null` or nothing).
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean' || value === undefined) return String(value);
  if (typeof value === 'function') return 'a function';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
