/**
 * When the units a refund gives back were charged, in store ms, as a settlement carries it in the call's
 * `token` (a reservation settled: see `lib/service/reservation.ts`); `undefined` for a refund that does not
 * say (`countOnly`, `RateLimiterService.refund`), which gives back from the counts as they stand.
 *
 * The windowed algorithms read it so that a give-back never creates quota in a window the units were not
 * counted in: fixed-window gives nothing back once the window of the charge has ended; sliding-window gives
 * back from the window they were counted in while it still weighs (the current or the previous one);
 * sliding-log removes entries logged at that millisecond only, none once they have aged out. Lua reads the
 * token with `tonumber`, which is `nil` for `''` exactly as this is `undefined`.
 */
export function chargedAt(token: string): number | undefined {
  if (token === '') return undefined;
  const at = Number(token);
  return Number.isInteger(at) ? at : undefined;
}
