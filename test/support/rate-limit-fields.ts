/**
 * Reading `RateLimit` / `RateLimit-Policy` fields in tests: through an RFC 9651 Structured Fields parser from
 * npm (never a regular expression), and bounding a `t` the test cannot know to the millisecond by the
 * times it sent the request at.
 */
import { parseList } from 'structured-headers';

/** A list field's members in order, each as its name plus its parameters (`undefined` when the field is absent). */
export function fieldMembers(field: string | undefined): Array<Record<string, unknown>> | undefined {
  return field === undefined ? undefined : parseList(field).map(([name, params]) => ({ name, ...Object.fromEntries(params) }));
}

/** `Date.now()` just before and just after `send`: the store decided at some whole ms in between. */
export async function timed<T>(send: () => PromiseLike<T>): Promise<{ res: T; before: number; after: number }> {
  const before = Date.now();
  const res = await send();
  return { res, before, after: Date.now() };
}

/**
 * Every value `ceil(msLeft(n) / 1000)` takes for whole `n` from `from` to `to`: the seconds a `t` (or
 * `Retry-After`) can say when the quantity it rounds up depends on a time known only within that span. A
 * span longer than 10 s means the test lost track of time, and throws.
 * @example secondsOver(before, after, (now) => 60_000 - (now % 60_000)) // a fixed minute's end
 */
export function secondsOver(from: number, to: number, msLeft: (n: number) => number): number[] {
  if (!(to >= from && to - from <= 10_000)) throw new Error(`secondsOver: span [${from}, ${to}] is not a few seconds`);
  const seen = new Set<number>();
  for (let n = from; n <= to; n++) seen.add(Math.ceil(msLeft(n) / 1_000));
  return [...seen].sort((a, b) => a - b);
}
