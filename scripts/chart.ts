/**
 * `npm run chart`: replays one deterministic traffic trace (steady load below the limit, a burst straddling a
 * window boundary, steady again) through every algorithm on the memory store with a virtual clock, and writes
 * `docs/<algorithm>.svg` (allowed vs rejected per 100 ms) plus `docs/comparison.svg` (allowed, one row per
 * algorithm), and `docs/overload.svg`, one simulated overload run (./overload-chart.ts). Hand-written SVG, no
 * dependencies; the same code always writes the same bytes.
 * `CHART_OUT_DIR` writes elsewhere (the tests use it).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../lib/rate-limiter.service';
import { MemoryStore } from '../lib/stores/memory/memory.store';
import { renderOverloadChart } from './overload-chart';
import { el, fmt, group, legend, line, rect, svgDocument, text, type LegendKind } from './svg';

// ---------------------------------------------------------------------------------------------------------
// Settings and the traffic trace
// ---------------------------------------------------------------------------------------------------------

/** The policy every algorithm runs with, and how the charts slice time. */
export const SETTINGS = {
  limit: 10,
  windowMs: 1000,
  burst: 10,
  /** `concurrency`: how long each admitted request holds its slot before releasing the lease. */
  holdMs: 250,
  /** Width of one bar. */
  bucketMs: 100,
  durationMs: 6000,
} as const;

/** A stretch of the trace: one request every `everyMs` in [from, to). */
export interface TracePhase {
  label: 'steady' | 'burst';
  from: number;
  to: number;
  everyMs: number;
}

/** Steady 5/s (half the limit), a 50/s burst across the 3 s window boundary, then steady again. */
export const TRACE_PHASES: readonly TracePhase[] = [
  { label: 'steady', from: 0, to: 2800, everyMs: 200 },
  { label: 'burst', from: 2800, to: 3200, everyMs: 20 },
  { label: 'steady', from: 3200, to: SETTINGS.durationMs, everyMs: 200 },
];

/** Arrival times (ms on the virtual clock), ascending. */
export function trafficTrace(phases: readonly TracePhase[] = TRACE_PHASES): number[] {
  const times: number[] = [];
  for (const { from, to, everyMs } of phases) for (let t = from; t < to; t += everyMs) times.push(t);
  return times;
}

// ---------------------------------------------------------------------------------------------------------
// Replay
// ---------------------------------------------------------------------------------------------------------

/** What happened to one request of the trace. */
export interface Outcome {
  /** Arrival (and decision) time, ms. */
  at: number;
  allowed: boolean;
  /** When the request actually proceeds: `at + delayMs` for `leaky-bucket`, else `at`. */
  proceedAt: number;
}

export interface Replay {
  algorithm: RateLimitAlgorithmName;
  outcomes: Outcome[];
}

const TRACKER = 'chart';

/** Every built-in algorithm, in dispatch order. */
export function algorithmNames(): RateLimitAlgorithmName[] {
  return new RateLimitAlgorithmRegistry().all().map((a) => a.name);
}

/**
 * Decides every request of `trace` under `algorithm` on a fresh memory store whose clock is moved by hand.
 * For `concurrency` each admitted request holds a lease for `holdMs` and then releases it.
 */
export async function replay(algorithm: RateLimitAlgorithmName, trace: readonly number[]): Promise<Replay> {
  let now = 0;
  const store = new MemoryStore({ clock: () => now });
  const limiter = new RateLimiterService(new RateLimitEngine(store), new RateLimitAlgorithmRegistry(), {});
  const { limit, windowMs, burst, holdMs } = SETTINGS;
  const policy: RateLimitPolicy = { algorithm, limit, window: windowMs, burst };
  // Leases in release order: every hold is the same length and arrivals ascend, so this stays a FIFO.
  const held: Array<{ until: number; release: () => Promise<void> }> = [];
  const outcomes: Outcome[] = [];
  for (const at of trace) {
    while (held.length > 0 && held[0].until <= at) {
      const lease = held.shift()!;
      now = lease.until;
      await lease.release();
    }
    now = at;
    if (algorithm === 'concurrency') {
      const lease = await limiter.lease(policy, TRACKER);
      if (lease.decision.allowed) held.push({ until: at + holdMs, release: lease.release });
      outcomes.push({ at, allowed: lease.decision.allowed, proceedAt: at });
    } else {
      const decision = await limiter.consume(policy, TRACKER);
      outcomes.push({ at, allowed: decision.allowed, proceedAt: at + (decision.delayMs ?? 0) });
    }
  }
  return { algorithm, outcomes };
}

// ---------------------------------------------------------------------------------------------------------
// Analysis
// ---------------------------------------------------------------------------------------------------------

/** How many of `times` fall in each `bucketMs` slice of [0, durationMs). */
export function perBucket(
  times: readonly number[],
  bucketMs: number = SETTINGS.bucketMs,
  durationMs: number = SETTINGS.durationMs,
): number[] {
  const counts = new Array<number>(Math.ceil(durationMs / bucketMs)).fill(0);
  for (const t of times) {
    const i = Math.floor(t / bucketMs);
    if (i >= 0 && i < counts.length) counts[i]++;
  }
  return counts;
}

/** The busiest half-open span [start, start + spanMs) over `times` (ascending): its start and count. */
export function busiestSpan(times: readonly number[], spanMs: number = SETTINGS.windowMs): { start: number; count: number } {
  let best = { start: 0, count: 0 };
  let end = 0;
  for (let i = 0; i < times.length; i++) {
    while (end < times.length && times[end] < times[i] + spanMs) end++;
    if (end - i > best.count) best = { start: times[i], count: end - i };
  }
  return best;
}

export const allowedTimes = (r: Replay) => r.outcomes.filter((o) => o.allowed).map((o) => o.at);
export const rejectedTimes = (r: Replay) => r.outcomes.filter((o) => !o.allowed).map((o) => o.at);
export const proceedTimes = (r: Replay) =>
  r.outcomes
    .filter((o) => o.allowed)
    .map((o) => o.proceedAt)
    .sort((a, b) => a - b);

/** Whether the chart shows a "proceeds" series: only shaping delays requests. */
const showsProceeds = (r: Replay) => r.algorithm === 'leaky-bucket';

// ---------------------------------------------------------------------------------------------------------
// Colours
// ---------------------------------------------------------------------------------------------------------

const COLORS = {
  allowed: '#009E73',
  rejected: '#D55E00',
  proceeds: '#0072B2',
  offered: '#DDDDDD',
  boundary: '#444444',
  band: '#F1F1F1',
  grid: '#E6E6E6',
  text: '#222222',
  muted: '#666666',
} as const;

// ---------------------------------------------------------------------------------------------------------
// Layout: a time axis shared by both chart kinds
// ---------------------------------------------------------------------------------------------------------

/** Maps virtual time to x over [left, right]. */
interface TimeScale {
  left: number;
  right: number;
  x(ms: number): number;
  /** Width of one bar slot. */
  slot: number;
}

function timeScale(left: number, right: number): TimeScale {
  const { durationMs, bucketMs } = SETTINGS;
  const perMs = (right - left) / durationMs;
  return { left, right, x: (ms) => left + ms * perMs, slot: bucketMs * perMs };
}

/** The burst phase as a shaded band, labelled above `top`. */
function burstBand(t: TimeScale, top: number, bottom: number): string[] {
  return TRACE_PHASES.filter((p) => p.label === 'burst').flatMap((p) => [
    rect(t.x(p.from), top, t.x(p.to) - t.x(p.from), bottom - top, { fill: COLORS.band }),
    text((t.x(p.from) + t.x(p.to)) / 2, top - 6, 'burst', { 'text-anchor': 'middle', 'font-size': 11, fill: COLORS.muted }),
  ]);
}

/** Dashed vertical lines at every window boundary inside the chart. */
function windowBoundaries(t: TimeScale, top: number, bottom: number): string {
  const lines: string[] = [];
  for (let ms = SETTINGS.windowMs; ms < SETTINGS.durationMs; ms += SETTINGS.windowMs) {
    lines.push(line(t.x(ms), top, t.x(ms), bottom, { stroke: COLORS.boundary, 'stroke-width': 1, 'stroke-dasharray': '5 4' }));
  }
  return group({ class: 'window-boundaries' }, lines);
}

/** Baseline with a tick and a label every 500 ms, and the axis title. */
function timeAxis(t: TimeScale, y: number): string {
  const parts = [line(t.left, y, t.right, y, { stroke: COLORS.text })];
  for (let ms = 0; ms <= SETTINGS.durationMs; ms += 500) {
    parts.push(line(t.x(ms), y, t.x(ms), y + 5, { stroke: COLORS.text }));
    parts.push(text(t.x(ms), y + 18, `${ms / 1000} s`, { 'text-anchor': 'middle', 'font-size': 11, fill: COLORS.muted }));
  }
  parts.push(
    text((t.left + t.right) / 2, y + 36, 'time (virtual clock)', { 'text-anchor': 'middle', 'font-size': 12, fill: COLORS.muted }),
  );
  return group({ class: 'time-axis' }, parts);
}

/** Bars for `counts`, stacked on `base` (counts already drawn below), scaled so `yMax` fills `height`. */
function bars(
  t: TimeScale,
  counts: readonly number[],
  base: readonly number[],
  bottom: number,
  height: number,
  yMax: number,
  cls: string,
  fill: string,
): string {
  const unit = height / yMax;
  const gap = Math.min(2, t.slot * 0.15);
  const out: string[] = [];
  counts.forEach((n, i) => {
    if (n === 0) return;
    const y = bottom - (base[i] + n) * unit;
    out.push(rect(t.left + i * t.slot + gap / 2, y, t.slot - gap, n * unit, { fill, class: cls }));
  });
  return group({ class: `bars ${cls}` }, out);
}

/**
 * The "proceeds" series: a dot per non-zero bucket, joined while consecutive buckets have proceeds, so a
 * drained queue reads as one even line.
 */
function proceedsSeries(t: TimeScale, counts: readonly number[], bottom: number, height: number, yMax: number): string {
  const unit = height / yMax;
  const point = (i: number) => ({ x: t.left + (i + 0.5) * t.slot, y: bottom - counts[i] * unit });
  const parts: string[] = [];
  let run: string[] = [];
  const endRun = () => {
    if (run.length > 1)
      parts.push(
        el('polyline', { points: run.join(' '), fill: 'none', stroke: COLORS.proceeds, 'stroke-width': 2, 'stroke-linejoin': 'round' }),
      );
    run = [];
  };
  counts.forEach((n, i) => {
    if (n === 0) return endRun();
    const { x, y } = point(i);
    run.push(`${fmt(x)},${fmt(y)}`);
  });
  endRun();
  counts.forEach((n, i) => {
    if (n > 0)
      parts.push(
        el('circle', {
          cx: point(i).x,
          cy: point(i).y,
          r: 3,
          fill: COLORS.proceeds,
          stroke: '#FFFFFF',
          'stroke-width': 1,
          class: 'proceed',
        }),
      );
  });
  return group({ class: 'proceeds' }, parts);
}

const usesBurst = (algorithm: RateLimitAlgorithmName) => new RateLimitAlgorithmRegistry().get(algorithm).usesBurst;

function policyNote(algorithm: RateLimitAlgorithmName): string {
  const { limit, windowMs, burst, holdMs } = SETTINGS;
  if (algorithm === 'concurrency') return `limit ${limit} in flight, each admitted request holds its slot ${holdMs} ms`;
  return `limit ${limit} per ${windowMs} ms${usesBurst(algorithm) ? `, burst ${burst}` : ''}`;
}

/**
 * Most requests a rate policy may admit in any one window span by design: `limit`, plus the bucket's
 * `burst` for bucket algorithms. `concurrency` bounds requests in flight, not a rate.
 */
export function designBound(algorithm: RateLimitAlgorithmName): number {
  if (algorithm === 'concurrency') return Infinity;
  return SETTINGS.limit + (usesBurst(algorithm) ? SETTINGS.burst : 0);
}

/** "peak 16 in 1 s", and for shaping also how many of them proceed in the busiest second. */
function peakNote(r: Replay): string {
  const admitted = `${busiestSpan(allowedTimes(r)).count} in 1 s`;
  return showsProceeds(r) ? `${admitted}, ${busiestSpan(proceedTimes(r)).count} proceed` : admitted;
}

// ---------------------------------------------------------------------------------------------------------
// Charts
// ---------------------------------------------------------------------------------------------------------

/** The trace in words, from {@link TRACE_PHASES}. */
function traceNote(): string {
  const rate = (p: TracePhase) => `${1000 / p.everyMs}/s`;
  const burst = TRACE_PHASES.find((p) => p.label === 'burst')!;
  const boundary = Math.ceil(burst.from / SETTINGS.windowMs) * SETTINGS.windowMs;
  return `Steady ${rate(TRACE_PHASES[0])}, a ${rate(burst)} burst across the ${boundary / 1000} s window boundary, steady again.`;
}

/** Tallest stack any chart draws: the trace's busiest bucket, so every chart shares one y scale. */
function yMaxOf(trace: readonly number[]): number {
  return Math.max(...perBucket(trace));
}

/** One algorithm: allowed vs rejected per bucket, stacked (their sum is the offered load). */
export function algorithmChart(r: Replay, trace: readonly number[]): string {
  const W = 960;
  const H = 420;
  const top = 92;
  const bottom = 320;
  const t = timeScale(64, W - 24);
  const yMax = yMaxOf(trace);
  const height = bottom - top;
  const allowed = perBucket(allowedTimes(r));
  const rejected = perBucket(rejectedTimes(r));
  const title = `${r.algorithm}: allowed vs rejected`;
  const summary = `${r.outcomes.length} requests, ${allowedTimes(r).length} allowed, ${rejectedTimes(r).length} rejected · peak ${peakNote(r)} · ${policyNote(r.algorithm)}`;

  const yAxis: string[] = [];
  for (let n = 0; n <= yMax; n++) {
    const y = bottom - (n * height) / yMax;
    if (n > 0) yAxis.push(line(t.left, y, t.right, y, { stroke: COLORS.grid }));
    yAxis.push(text(t.left - 8, y + 4, String(n), { 'text-anchor': 'end', 'font-size': 11, fill: COLORS.muted }));
  }
  yAxis.push(
    text(18, (top + bottom) / 2, `requests per ${SETTINGS.bucketMs} ms`, {
      'text-anchor': 'middle',
      'font-size': 12,
      fill: COLORS.muted,
      transform: `rotate(-90 18 ${(top + bottom) / 2})`,
    }),
  );

  const entries: Array<{ kind: LegendKind; color: string; label: string }> = [
    { kind: 'box', color: COLORS.allowed, label: 'allowed' },
    { kind: 'box', color: COLORS.rejected, label: 'rejected' },
  ];
  if (showsProceeds(r)) entries.push({ kind: 'line', color: COLORS.proceeds, label: 'proceeds (admitted + delayMs)' });
  entries.push({ kind: 'dash', color: COLORS.boundary, label: `window boundary (${SETTINGS.windowMs} ms)` });

  const body = [
    text(t.left, 32, title, { 'font-size': 20, 'font-weight': 'bold' }),
    text(t.left, 56, summary, { 'font-size': 12, fill: COLORS.muted }),
    ...burstBand(t, top, bottom),
    group({ class: 'y-axis' }, yAxis),
    bars(t, allowed, new Array<number>(allowed.length).fill(0), bottom, height, yMax, 'allowed', COLORS.allowed),
    bars(t, rejected, allowed, bottom, height, yMax, 'rejected', COLORS.rejected),
    showsProceeds(r) ? proceedsSeries(t, perBucket(proceedTimes(r)), bottom, height, yMax) : '',
    windowBoundaries(t, top, bottom),
    timeAxis(t, bottom),
    legend(t.left, H - 18, entries),
  ].filter(Boolean);
  return svgDocument(W, H, title, body);
}

/** Every algorithm on one time axis: allowed per bucket over the offered load, one row each. */
export function comparisonChart(replays: readonly Replay[], trace: readonly number[]): string {
  const W = 960;
  const rowH = 64;
  const top = 96;
  const t = timeScale(196, W - 24);
  const bottom = top + replays.length * rowH;
  const H = bottom + 90;
  const yMax = yMaxOf(trace);
  const barH = rowH - 16;
  const offered = perBucket(trace);
  const title = 'Every algorithm, same traffic: requests allowed per 100 ms';
  const zero = new Array<number>(offered.length).fill(0);

  const rows = replays.map((r, i) => {
    const base = top + (i + 1) * rowH - 4;
    const over = busiestSpan(allowedTimes(r)).count > designBound(r.algorithm);
    return group(
      { class: 'row', 'data-algorithm': r.algorithm },
      [
        i % 2 === 1 ? rect(0, top + i * rowH, W, rowH, { fill: '#FAFAFA' }) : '',
        text(16, base - barH / 2 - 2, r.algorithm, { 'font-size': 14, 'font-weight': 'bold' }),
        text(16, base - barH / 2 + 15, `peak ${peakNote(r)}`, {
          'font-size': 11,
          fill: over ? COLORS.rejected : COLORS.muted,
          'font-weight': over ? 'bold' : undefined,
        }),
        bars(t, offered, zero, base, barH, yMax, 'offered', COLORS.offered),
        bars(t, perBucket(allowedTimes(r)), zero, base, barH, yMax, 'allowed', COLORS.allowed),
        showsProceeds(r) ? proceedsSeries(t, perBucket(proceedTimes(r)), base, barH, yMax) : '',
        line(t.left, base, t.right, base, { stroke: '#BBBBBB' }),
      ].filter(Boolean),
    );
  });

  const body = [
    text(16, 32, title, { 'font-size': 20, 'font-weight': 'bold' }),
    text(
      16,
      56,
      `${traceNote()} Policy: ${policyNote('fixed-window')}, burst ${SETTINGS.burst}; concurrency: ${SETTINGS.limit} in flight, ${SETTINGS.holdMs} ms each.`,
      { 'font-size': 12, fill: COLORS.muted },
    ),
    text(16, 74, `peak = most requests allowed in any 1 s span; red when above the limit (limit + burst for the bucket algorithms).`, {
      'font-size': 12,
      fill: COLORS.muted,
    }),
    ...burstBand(t, top, bottom),
    ...rows,
    windowBoundaries(t, top, bottom),
    timeAxis(t, bottom),
    legend(16, H - 18, [
      { kind: 'box', color: COLORS.offered, label: 'offered (the trace)' },
      { kind: 'box', color: COLORS.allowed, label: 'allowed' },
      { kind: 'line', color: COLORS.proceeds, label: 'leaky-bucket: proceeds (admitted + delayMs)' },
      { kind: 'dash', color: COLORS.boundary, label: 'window boundary' },
    ]),
  ];
  return svgDocument(W, H, title, body);
}

// ---------------------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------------------

export interface ChartSet {
  /** Absolute paths written, per algorithm then the comparison. */
  files: string[];
  replays: Replay[];
  trace: number[];
}

/** Replays the trace through every algorithm and writes the SVGs into `outDir` (created if missing). */
export async function renderCharts(outDir: string): Promise<ChartSet> {
  const trace = trafficTrace();
  const replays: Replay[] = [];
  for (const name of algorithmNames()) replays.push(await replay(name, trace));
  mkdirSync(outDir, { recursive: true });
  const write = (name: string, svg: string) => {
    const file = join(outDir, `${name}.svg`);
    writeFileSync(file, svg);
    return file;
  };
  const files = replays.map((r) => write(r.algorithm, algorithmChart(r, trace)));
  files.push(write('comparison', comparisonChart(replays, trace)));
  return { files, replays, trace };
}

if (require.main === module) {
  const outDir = process.env.CHART_OUT_DIR ?? join(__dirname, '..', 'docs');
  renderCharts(outDir).then(
    ({ files }) => {
      files.push(renderOverloadChart(outDir).file);
      for (const file of files) console.log(`wrote ${relative(process.cwd(), file)}`);
    },
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
}
