/**
 * Numbers in, markdown out: medians, percentiles and tables. Nothing here measures or asserts.
 */

/** Median of `values` (NaN when empty). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The `p`-th percentile (0..100) of an already sorted array, nearest rank. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

/** 12345.6 → "12,346"; large numbers grouped, small ones with a few significant digits. */
export function fmtRate(n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  return Math.round(n).toLocaleString('en-US');
}

/** Microseconds with 3 significant digits: 0.0412 ms → "41.2 µs". */
export function fmtMicros(ms: number): string {
  if (!Number.isFinite(ms)) return 'n/a';
  const us = ms * 1000;
  if (us >= 10_000) return `${(us / 1000).toFixed(1)} ms`;
  return `${us >= 100 ? us.toFixed(0) : us.toPrecision(3)} µs`;
}

/** 1.2345 → "1.23×". */
export function fmtRatio(r: number): string {
  return Number.isFinite(r) ? `${r.toFixed(2)}×` : 'n/a';
}

/** Per-round ratios as "1.21 / 1.30 / 1.18" and their median. */
export function fmtRatios(ratios: readonly number[]): string {
  if (ratios.length === 0) return 'n/a';
  return `**${fmtRatio(median(ratios))}** (${ratios.map((r) => r.toFixed(2)).join(' / ')})`;
}

/** A markdown table; cells are printed as given. */
export function table(header: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const line = (cells: readonly string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Prints a section heading and a line of context (settings) before a part's tables. */
export function heading(title: string, settings: Record<string, unknown>): void {
  const parts = Object.entries(settings).map(([k, v]) => `${k}=${String(v)}`);
  console.log(`\n## ${title}\n\n_${parts.join(', ')}; node ${process.version}; ${new Date().toISOString()}_\n`);
}
