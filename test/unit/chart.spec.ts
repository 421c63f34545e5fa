/**
 * `npm run chart` (scripts/chart.ts): every SVG it writes parses as XML and has the expected content, the
 * replay it draws shows what each algorithm is known for, the output is deterministic, and the committed
 * docs/*.svg are what the script writes today.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import {
  algorithmNames,
  allowedTimes,
  busiestSpan,
  designBound,
  perBucket,
  proceedTimes,
  rejectedTimes,
  renderCharts,
  SETTINGS,
  TRACE_PHASES,
  type ChartSet,
  type Replay,
} from '../../scripts/chart';

const ROOT = join(__dirname, '..', '..');

type Node = Record<string, unknown>;

const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : [v]);
const isNode = (v: unknown): v is Node => v !== null && typeof v === 'object';

/** Every element named `tag` anywhere below `node` (fast-xml-parser's object tree). */
function elements(node: unknown, tag: string): Node[] {
  if (Array.isArray(node)) return node.flatMap((n) => elements(n, tag));
  if (!isNode(node)) return [];
  return Object.entries(node).flatMap(([key, value]) => [
    ...(key === tag ? asArray(value).map((v) => (isNode(v) ? v : { '#text': v })) : []),
    ...elements(value, tag),
  ]);
}

const withClass = (nodes: Node[], cls: string) =>
  nodes.filter((n) =>
    String(n.class ?? '')
      .split(' ')
      .includes(cls),
  );

function parseSvg(file: string): { source: string; svg: Node } {
  const source = readFileSync(file, 'utf8');
  const valid = XMLValidator.validate(source);
  if (valid !== true) throw new Error(`${basename(file)} is not well-formed XML: ${JSON.stringify(valid.err)}`);
  const tree = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '' }).parse(source) as Node;
  expect(Object.keys(tree)).toEqual(['svg']);
  return { source, svg: tree.svg as Node };
}

const nonZero = (counts: number[]) => counts.filter((n) => n > 0).length;

describe('npm run chart', () => {
  let dir: string;
  let charts: ChartSet;
  const replayOf = (name: string): Replay => charts.replays.find((r) => r.algorithm === name)!;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'rl-chart-'));
    charts = await renderCharts(dir);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('writes one SVG per algorithm and comparison.svg', () => {
    const expected = [...algorithmNames(), 'comparison'].map((n) => `${n}.svg`);
    expect(algorithmNames()).toHaveLength(7);
    expect(charts.files.map((f) => basename(f))).toEqual(expected);
    expect(readdirSync(dir).sort()).toEqual([...expected].sort());
  });

  describe.each(algorithmNames())('%s.svg', (name) => {
    it('is well-formed SVG with a size, a title, stacked bars and window boundaries', () => {
      const { source, svg } = parseSvg(join(dir, `${name}.svg`));
      const r = replayOf(name);
      expect(svg.xmlns).toBe('http://www.w3.org/2000/svg');
      const [w, h] = [Number(svg.width), Number(svg.height)];
      expect(w).toBeGreaterThan(0);
      expect(h).toBeGreaterThan(0);
      expect(svg.viewBox).toBe(`0 0 ${w} ${h}`);
      expect(source).not.toMatch(/NaN|undefined|Infinity/);

      expect(svg.title).toBe(`${name}: allowed vs rejected`);
      const texts = elements(svg, 'text').map((t) => String(t['#text']));
      expect(texts).toContain(`${name}: allowed vs rejected`);
      expect(texts).toEqual(expect.arrayContaining(['allowed', 'rejected', 'burst', 'time (virtual clock)']));

      // One bar per non-empty 100 ms bucket and series; together they are the whole trace.
      const rects = elements(svg, 'rect');
      expect(withClass(rects, 'allowed')).toHaveLength(nonZero(perBucket(allowedTimes(r))));
      expect(withClass(rects, 'rejected')).toHaveLength(nonZero(perBucket(rejectedTimes(r))));
      expect(withClass(rects, 'allowed').length).toBeGreaterThan(0);
      expect(allowedTimes(r).length + rejectedTimes(r).length).toBe(charts.trace.length);

      const boundaries = elements(svg, 'g').find((g) => g.class === 'window-boundaries')!;
      const dashed = elements(boundaries, 'line');
      expect(dashed).toHaveLength(SETTINGS.durationMs / SETTINGS.windowMs - 1);
      for (const l of dashed) expect(l['stroke-dasharray']).toBeDefined();

      expect(withClass(elements(svg, 'circle'), 'proceed').length > 0).toBe(name === 'leaky-bucket');
    });
  });

  it('comparison.svg is well-formed, with one row per algorithm on one time axis', () => {
    const { source, svg } = parseSvg(join(dir, 'comparison.svg'));
    expect(svg.viewBox).toBe(`0 0 ${svg.width} ${svg.height}`);
    expect(source).not.toMatch(/NaN|undefined|Infinity/);
    expect(String(svg.title)).toMatch(/Every algorithm/);
    const rows = withClass(elements(svg, 'g'), 'row');
    expect(rows.map((g) => g['data-algorithm'])).toEqual(algorithmNames());
    for (const row of rows) {
      const r = replayOf(String(row['data-algorithm']));
      expect(withClass(elements(row, 'rect'), 'allowed')).toHaveLength(nonZero(perBucket(allowedTimes(r))));
      expect(withClass(elements(row, 'rect'), 'offered')).toHaveLength(nonZero(perBucket(charts.trace)));
    }
    expect(withClass(elements(svg, 'g'), 'time-axis')).toHaveLength(1);
  });

  describe('what the replay shows', () => {
    const { limit, windowMs } = SETTINGS;

    it('fixed-window lets more than the limit through in a 1 s span straddling a window boundary', () => {
      const peak = busiestSpan(allowedTimes(replayOf('fixed-window')), windowMs);
      expect(peak.count).toBeGreaterThan(limit);
      const boundary = Math.ceil(peak.start / windowMs) * windowMs;
      expect(peak.start).toBeLessThan(boundary);
      expect(peak.start + windowMs).toBeGreaterThan(boundary);
    });

    it('sliding-log never allows more than the limit in any 1 s span', () => {
      expect(busiestSpan(allowedTimes(replayOf('sliding-log')), windowMs).count).toBeLessThanOrEqual(limit);
    });

    it('rate algorithms other than fixed-window stay within limit (+ burst for buckets) in every 1 s span', () => {
      for (const name of ['sliding-window', 'sliding-log', 'token-bucket', 'gcra', 'leaky-bucket']) {
        expect([name, busiestSpan(allowedTimes(replayOf(name)), windowMs).count <= designBound(replayOf(name).algorithm)]).toEqual([
          name,
          true,
        ]);
      }
    });

    it('leaky-bucket delays the burst and lets requests proceed at least window/limit apart', () => {
      const r = replayOf('leaky-bucket');
      expect(r.outcomes.some((o) => o.allowed && o.proceedAt > o.at)).toBe(true);
      const times = proceedTimes(r);
      for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBeGreaterThanOrEqual(windowMs / limit);
      expect(busiestSpan(times, windowMs).count).toBeLessThanOrEqual(limit);
    });

    it('the burst is where the algorithms disagree: every one rejects something there, nothing before it', () => {
      const burstStart = TRACE_PHASES.find((p) => p.label === 'burst')!.from;
      for (const r of charts.replays) {
        const rejected = rejectedTimes(r);
        expect([r.algorithm, rejected.length > 0, rejected.every((t) => t >= burstStart)]).toEqual([r.algorithm, true, true]);
      }
    });
  });

  it('is deterministic, and the committed docs/*.svg are up to date (run `npm run chart` if not)', async () => {
    const again = mkdtempSync(join(tmpdir(), 'rl-chart-'));
    try {
      await renderCharts(again);
      for (const file of charts.files) {
        const svg = readFileSync(file, 'utf8');
        expect(readFileSync(join(again, basename(file)), 'utf8')).toBe(svg);
        expect([basename(file), readFileSync(join(ROOT, 'docs', basename(file)), 'utf8') === svg]).toEqual([basename(file), true]);
      }
    } finally {
      rmSync(again, { recursive: true, force: true });
    }
  });

  it('runs as `npm run chart`, writing into CHART_OUT_DIR', () => {
    const out = mkdtempSync(join(tmpdir(), 'rl-chart-cli-'));
    try {
      const run = spawnSync('npm', ['run', '--silent', 'chart'], {
        cwd: ROOT,
        env: { ...process.env, CHART_OUT_DIR: out },
        encoding: 'utf8',
        timeout: 60_000,
      });
      if (run.status !== 0) throw new Error(`npm run chart exited ${run.status}: ${run.stderr}`);
      for (const file of charts.files) expect(readFileSync(join(out, basename(file)), 'utf8')).toBe(readFileSync(file, 'utf8'));
      // And the overload guide's chart (test/unit/overload-chart.spec.ts checks it).
      expect(readFileSync(join(out, 'overload.svg'), 'utf8')).toBe(readFileSync(join(ROOT, 'docs', 'overload.svg'), 'utf8'));
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
