/**
 * `ceil(a / b)` for non-negative integers, written exactly as the Lua scripts write it so that the memory
 * twin and Redis round identically.
 */
export function ceilDiv(a: number, b: number): number {
  return Math.floor((a + b - 1) / b);
}
