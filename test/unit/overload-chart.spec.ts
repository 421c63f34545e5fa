/**
 * docs/overload.svg (scripts/overload-chart.ts, written by `npm run chart`): it parses, shows what the
 * simulated run did, is the same on every run, and the committed file is what the script writes today.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { atEnd, OVERLOAD_RUN, OVERLOAD_RUNS, renderOverloadChart, type OverloadSeries } from '../../scripts/overload-chart';

const ROOT = join(__dirname, '..', '..');

describe('docs/overload.svg', () => {
  let dir: string;
  let file: string;
  let runs: OverloadSeries[];
  const run = (name: string) => runs.find((r) => r.name === name)!;
  const step = OVERLOAD_RUN.stepAtMs / OVERLOAD_RUN.sampleMs;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'rl-overload-chart-'));
    ({ file, runs } = renderOverloadChart(dir));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('is well-formed SVG with a line per run and reading kind', () => {
    const source = readFileSync(file, 'utf8');
    expect(XMLValidator.validate(source)).toBe(true);
    expect(source).not.toMatch(/NaN|undefined|Infinity/);
    const svg = (new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '' }).parse(source) as { svg: Record<string, unknown> }).svg;
    expect(svg.viewBox).toBe(`0 0 ${svg.width} ${svg.height}`);
    const groups = svg.g as Array<Record<string, unknown>>;
    const drawn = groups.filter((g) => g.class === 'run');
    expect(drawn.map((g) => g['data-run'])).toEqual([...OVERLOAD_RUNS]);
    for (const g of drawn) {
      const lines = ([] as Array<Record<string, unknown>>).concat(g.polyline as Record<string, unknown>);
      const classes = new Set(lines.map((l) => l.class));
      // No limit has no limit line, and its in-flight line leaves the panel at the step.
      expect([...classes].sort()).toEqual(g['data-run'] === 'no limit' ? ['inflight', 'latency'] : ['inflight', 'latency', 'limit']);
    }
  });

  it('shows the run: 0.5× load served at 20 ms by all; at 2×, queueing without a limit, 20 – 25 ms with one', () => {
    expect(runs.map((r) => r.inflight.length)).toEqual([100, 100, 100]);
    for (const r of runs) for (const ms of r.latencyMs.slice(0, step)) expect([r.name, Math.round(ms!)]).toEqual([r.name, 20]);
    // Without a limit every request is admitted and the queue grows by about 2,500 a second.
    const none = run('no limit');
    expect([none.refused, atEnd(none).inflight]).toEqual([0, 31_895]);
    expect(atEnd(none).latencyMs!).toBeGreaterThan(100 * OVERLOAD_RUN.baseMs);
    for (const name of ['vegas', 'gradient']) {
      const r = run(name);
      expect([name, atEnd(r).limit]).toEqual([name, 56]);
      r.inflight.forEach((n, i) => expect(n).toBeLessThanOrEqual(r.limit[i]!));
      expect(Math.max(...r.latencyMs.slice(step).map((ms) => ms!))).toBeLessThanOrEqual(25);
      expect(r.refused).toBeGreaterThan(0);
    }
  });

  it('is deterministic, committed as written today (run `npm run chart` if not), and in the guide', () => {
    const again = mkdtempSync(join(tmpdir(), 'rl-overload-chart-'));
    try {
      const svg = readFileSync(file, 'utf8');
      expect(readFileSync(renderOverloadChart(again).file, 'utf8')).toBe(svg);
      expect(readFileSync(join(ROOT, 'docs', 'overload.svg'), 'utf8') === svg).toBe(true);
    } finally {
      rmSync(again, { recursive: true, force: true });
    }
    expect(readFileSync(join(ROOT, 'docs', 'overload.md'), 'utf8')).toContain('](overload.svg)');
  });
});
