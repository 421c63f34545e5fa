/**
 * The chart of docs/overload.md, written by `npm run chart` as `docs/overload.svg`: one simulated overload run
 * on the processor-sharing server of the convergence tests (test/support/processor-sharing.ts), once without
 * a limit and once per adaptive strategy, with the library's default windows. The offered load steps from
 * half the server's capacity to twice it; every 100 ms of simulated time the chart takes the limit, the
 * requests in flight and the mean latency of the requests that ended. Seeded, no wall clock: the same code
 * always writes the same bytes.
 */
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import type { AdaptiveStrategy } from '../lib/overload/adaptive-strategy';
import { GradientStrategy } from '../lib/overload/gradient.strategy';
import { VegasStrategy } from '../lib/overload/vegas.strategy';
import { ProcessorSharingRun } from '../test/support/processor-sharing';
import { el, fmt, group, legend, line, text, svgDocument } from './svg';

/** The simulated run. */
export const OVERLOAD_RUN = {
  /** Requests the server serves at full speed at once; beyond, they share it. */
  capacity: 50,
  baseMs: 20,
  /** Offered load, as a multiple of capacity, before and after the step. */
  loadBefore: 0.5,
  loadAfter: 2,
  stepAtMs: 2000,
  durationMs: 10_000,
  /** How often the chart takes a reading. */
  sampleMs: 100,
  /** The policy's `limit`: `@RateLimit({ algorithm: 'adaptive', limit: 200, adaptive: { strategy } })`. */
  ceiling: 200,
} as const;

export type OverloadRunName = 'no limit' | 'vegas' | 'gradient';
export const OVERLOAD_RUNS: readonly OverloadRunName[] = ['no limit', 'vegas', 'gradient'];

/** One run, a reading per `sampleMs`, taken at its end. */
export interface OverloadSeries {
  name: OverloadRunName;
  /** The limit in force (`undefined` without one). */
  limit: Array<number | undefined>;
  inflight: number[];
  /** Mean RTT (ms) of the requests that ended in the interval (`undefined` when none did). */
  latencyMs: Array<number | undefined>;
  admitted: number;
  refused: number;
  /** Requests that ended in the run. */
  completed: number;
}

/** A seeded uniform draw in [0, 1) (a linear congruential generator), for Vegas's probe jitter. */
function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

/** The strategy a route's policy builds, with its defaults (initial 20; min 1 for vegas, 20 for gradient). */
function strategyOf(name: OverloadRunName): { strategy: AdaptiveStrategy; floor: number } {
  const max = OVERLOAD_RUN.ceiling;
  if (name === 'vegas') return { strategy: new VegasStrategy({ max, random: seeded(1) }), floor: 1 };
  if (name === 'gradient') return { strategy: new GradientStrategy({ max }), floor: 20 };
  const unlimited = Number.MAX_SAFE_INTEGER;
  return { strategy: { limit: unlimited, probeDue: false, update: () => unlimited }, floor: 1 };
}

export function simulateOverload(name: OverloadRunName): OverloadSeries {
  const { capacity, baseMs, loadBefore, loadAfter, stepAtMs, durationMs, sampleMs } = OVERLOAD_RUN;
  let ended = 0;
  let sumRtt = 0;
  let completed = 0;
  const { strategy, floor } = strategyOf(name);
  const run = new ProcessorSharingRun(strategy, {
    capacity,
    baseMs,
    load: loadBefore,
    floor,
    window: {},
    onEnd: (rttMs) => {
      ended++;
      sumRtt += rttMs;
    },
  });
  const series: OverloadSeries = { name, limit: [], inflight: [], latencyMs: [], admitted: 0, refused: 0, completed: 0 };
  for (let at = sampleMs; at <= durationMs; at += sampleMs) {
    if (at > stepAtMs) run.load = loadAfter;
    run.runUntilTime(at);
    series.limit.push(name === 'no limit' ? undefined : run.limiter.limit);
    series.inflight.push(run.inflight);
    series.latencyMs.push(ended > 0 ? sumRtt / ended : undefined);
    completed += ended;
    ended = 0;
    sumRtt = 0;
  }
  return { ...series, admitted: run.admitted, refused: run.refused, completed };
}

// ---------------------------------------------------------------------------------------------------------
// The chart
// ---------------------------------------------------------------------------------------------------------

const COLORS: Readonly<Record<OverloadRunName, string>> = { 'no limit': '#D55E00', vegas: '#009E73', gradient: '#0072B2' };
const MUTED = '#666666';
const GRID = '#E6E6E6';

/** A panel's vertical scale: `y(v)` for v in [lo, hi], log or linear; readings above `hi` are off the panel. */
interface Panel {
  top: number;
  bottom: number;
  lo: number;
  hi: number;
  /** Where the grid lines go. */
  ticks: number[];
  y(v: number): number;
}

function logPanel(top: number, bottom: number, lo: number, hi: number): Panel {
  const span = Math.log10(hi) - Math.log10(lo);
  const y = (v: number) => bottom - ((Math.log10(Math.max(lo, v)) - Math.log10(lo)) / span) * (bottom - top);
  const ticks: number[] = [];
  for (let v = lo; v <= hi; v *= 10) ticks.push(v);
  return { top, bottom, lo, hi, ticks, y };
}

function linearPanel(top: number, bottom: number, hi: number, every: number): Panel {
  const ticks: number[] = [];
  for (let v = 0; v <= hi; v += every) ticks.push(v);
  return { top, bottom, lo: 0, hi, ticks, y: (v) => bottom - (v / hi) * (bottom - top) };
}

function yAxis(p: Panel, left: number, right: number, label: (v: number) => string, title: string): string {
  const parts: string[] = [];
  for (const v of p.ticks) {
    parts.push(line(left, p.y(v), right, p.y(v), { stroke: GRID }));
    parts.push(text(left - 8, p.y(v) + 4, label(v), { 'text-anchor': 'end', 'font-size': 11, fill: MUTED }));
  }
  const mid = (p.top + p.bottom) / 2;
  parts.push(text(18, mid, title, { 'text-anchor': 'middle', 'font-size': 12, fill: MUTED, transform: `rotate(-90 18 ${mid})` }));
  return group({ class: 'y-axis' }, parts);
}

/** A polyline through the readings on the panel; a gap where a reading is undefined or above it. */
function seriesLine(x: (i: number) => number, values: Array<number | undefined>, p: Panel, attrs: Record<string, string | number>): string {
  const runs: string[][] = [[]];
  values.forEach((v, i) => {
    if (v === undefined || v > p.hi) runs.push([]);
    else runs[runs.length - 1].push(`${fmt(x(i))},${fmt(p.y(v))}`);
  });
  return runs
    .filter((r) => r.length > 1)
    .map((points) => el('polyline', { points: points.join(' '), fill: 'none', 'stroke-width': 2, 'stroke-linejoin': 'round', ...attrs }))
    .join('\n');
}

const seconds = (ms: number) => `${ms / 1000} s`;
const count = (v: number) => (v >= 1000 ? `${v / 1000}k` : String(v));
const duration = (ms: number) => (ms >= 1000 ? `${fmt(ms / 1000)} s` : `${Math.round(ms)} ms`);
const thousands = (n: number) => String(n).replace(/\B(?=(\d{3})+$)/g, ',');

/** Each run's last readings, at the end of the run. */
export function atEnd(s: OverloadSeries): { limit?: number; inflight: number; latencyMs?: number } {
  const last = s.inflight.length - 1;
  return { limit: s.limit[last], inflight: s.inflight[last], latencyMs: s.latencyMs[last] };
}

export function overloadChart(runs: readonly OverloadSeries[]): string {
  const { capacity, baseMs, loadBefore, loadAfter, stepAtMs, durationMs, sampleMs, ceiling } = OVERLOAD_RUN;
  const W = 960;
  const left = 72;
  const right = W - 24;
  const x = (i: number) => left + ((i + 1) * sampleMs * (right - left)) / durationMs;
  const xAt = (ms: number) => left + (ms * (right - left)) / durationMs;
  const inflight = linearPanel(112, 312, 100, 20);
  const latency = logPanel(360, 540, 10, 10_000);
  const axisY = latency.bottom;
  const H = axisY + 96;
  const title = 'One simulated overload, with and without an adaptive limit';

  const timeAxis: string[] = [line(left, axisY, right, axisY, { stroke: '#222222' })];
  for (let ms = 0; ms <= durationMs; ms += 1000) {
    timeAxis.push(line(xAt(ms), axisY, xAt(ms), axisY + 5, { stroke: '#222222' }));
    timeAxis.push(text(xAt(ms), axisY + 18, seconds(ms), { 'text-anchor': 'middle', 'font-size': 11, fill: MUTED }));
  }
  timeAxis.push(text((left + right) / 2, axisY + 36, 'time (simulated clock)', { 'text-anchor': 'middle', 'font-size': 12, fill: MUTED }));

  const step = group({ class: 'load-step' }, [
    line(xAt(stepAtMs), inflight.top, xAt(stepAtMs), axisY, { stroke: '#444444', 'stroke-dasharray': '5 4' }),
    text(xAt(stepAtMs) - 6, inflight.bottom - 8, `load ${loadBefore}× → ${loadAfter}× capacity`, {
      'text-anchor': 'end',
      'font-size': 11,
      fill: MUTED,
    }),
  ]);
  // Readings above the panel: where each run leaves it, and where it ends up.
  const offPanel = runs.flatMap((s) => {
    const leaves = s.inflight.findIndex((v) => v > inflight.hi);
    if (leaves < 0) return [];
    const last = s.inflight[s.inflight.length - 1];
    return [
      text(
        x(leaves) + 8,
        inflight.top + 14,
        `${s.name}: ${thousands(last)} in flight at ${seconds(durationMs)}, off the scale from ${duration((leaves + 1) * sampleMs)} ↑`,
        {
          'font-size': 11,
          fill: COLORS[s.name],
          class: 'off-panel',
        },
      ),
    ];
  });

  const lines = runs.map((s) =>
    group({ class: 'run', 'data-run': s.name }, [
      seriesLine(x, s.inflight, inflight, { stroke: COLORS[s.name], class: 'inflight' }),
      seriesLine(x, s.limit, inflight, { stroke: COLORS[s.name], 'stroke-dasharray': '6 4', 'stroke-width': 1.5, class: 'limit' }),
      seriesLine(x, s.latencyMs, latency, { stroke: COLORS[s.name], class: 'latency' }),
    ]),
  );

  const summary = runs
    .map((s) => {
      const last = atEnd(s);
      const limit = last.limit === undefined ? '' : `limit ${last.limit}, `;
      return `${s.name}: ${limit}${thousands(last.inflight)} in flight, latency ${duration(last.latencyMs ?? 0)}`;
    })
    .join(' · ');

  const body = [
    text(16, 30, title, { 'font-size': 20, 'font-weight': 'bold' }),
    text(
      16,
      52,
      `A processor-sharing server of capacity ${capacity} and ${baseMs} ms; @RateLimit({ algorithm: 'adaptive', limit: ${ceiling} }), default windows.`,
      { 'font-size': 12, fill: MUTED },
    ),
    text(16, 70, `At ${seconds(durationMs)}: ${summary}.`, { 'font-size': 12, fill: MUTED }),
    text(left, inflight.top - 12, 'requests in flight (solid) and the limit (dashed)', { 'font-size': 12, 'font-weight': 'bold' }),
    text(left, latency.top - 12, 'mean latency of the requests that ended, per 100 ms', { 'font-size': 12, 'font-weight': 'bold' }),
    yAxis(inflight, left, right, count, 'requests'),
    yAxis(latency, left, right, duration, 'latency (log)'),
    step,
    ...offPanel,
    ...lines,
    group({ class: 'time-axis' }, timeAxis),
    legend(
      left,
      H - 18,
      runs.map((s) => ({ kind: 'line' as const, color: COLORS[s.name], label: s.name })),
    ),
  ];
  return svgDocument(W, H, title, body);
}

/** Simulates every run and writes `overload.svg` into `outDir` (which must exist); its path. */
export function renderOverloadChart(outDir: string): { file: string; runs: OverloadSeries[] } {
  const runs = OVERLOAD_RUNS.map(simulateOverload);
  const file = join(outDir, 'overload.svg');
  writeFileSync(file, overloadChart(runs));
  return { file, runs };
}
