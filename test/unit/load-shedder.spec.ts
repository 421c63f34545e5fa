import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPressure, RateLimitSheddingEvent } from '../../lib/interfaces/overload.interface';
import { LoadShedder } from '../../lib/overload/load-shedder';
import { ProcessPressure, type PressureSource } from '../../lib/overload/process-pressure';
import { describe as describeChange } from '../../lib/overload/rate-limit-load-shedding';
import { validateModuleOptions } from '../../lib/policy/validate-options';

/** A source that replays readings, one per sample. */
function replay(delays: number[], utilisation = 0.5): PressureSource {
  let i = 0;
  return { read: (): RateLimitPressure => ({ eventLoopDelayMs: delays[i++] ?? 0, eventLoopUtilization: utilisation, heapUsedRatio: 0.1 }) };
}

function shedderOf(source: PressureSource, options = {}) {
  const changes: RateLimitSheddingEvent[] = [];
  const shedder = new LoadShedder({ options: { sampleIntervalMs: 100, ...options }, source, changed: (e) => changes.push(e) });
  return { shedder, changes };
}

function busyWait(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // A synchronous block, as a CPU-bound handler makes one.
  }
}

describe('LoadShedder', () => {
  it('a 200 ms block turns shedding on at the next sample and off within two after it ends (injected readings)', () => {
    // 100 ms intervals: the sample that follows the block reads its 200 ms delay.
    const { shedder, changes } = shedderOf(replay([5, 200, 5, 5]));
    const levels = [0, 1, 2, 3].map(() => (shedder.sample(), shedder.level));
    expect(levels).toEqual(['none', 'sheddable', 'none', 'none']);
    expect(changes.map(({ previous, level }) => `${previous}→${level}`)).toEqual(['none→sheddable', 'sheddable→none']);
    expect(describeChange(changes[0])).toBe(
      "load shedding: refusing 'sheddable' calls (was off): event-loop delay 200 ms, utilisation 0.50, heap 0.10",
    );
    expect(describeChange(changes[1])).toBe(
      "load shedding off (was refusing 'sheddable' calls): event-loop delay 5 ms, utilisation 0.50, heap 0.10",
    );
  });

  it('reads a real 200 ms synchronous block through monitorEventLoopDelay', async () => {
    const source = new ProcessPressure();
    source.start();
    // Utilisation is not watched here: a test process is busy by nature.
    const { shedder } = shedderOf(source, { eventLoopDelayMs: 150, eventLoopUtilization: 1 });
    try {
      await new Promise((resolve) => setTimeout(resolve, 30));
      busyWait(200);
      await new Promise((resolve) => setTimeout(resolve, 20));
      shedder.sample();
      expect(shedder.level).toBe('sheddable');
      for (let i = 0; i < 2 && shedder.level !== 'none'; i++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        shedder.sample();
      }
      expect(shedder.level).toBe('none');
    } finally {
      source.stop();
    }
  });

  it('escalates one class per interval and restores one per interval; never refuses critical calls', () => {
    const { shedder } = shedderOf(replay([500, 500, 500, 500, 5, 5, 5]));
    const seen = [0, 1, 2, 3, 4, 5, 6].map(() => {
      shedder.sample();
      return [shedder.level, shedder.refuses('sheddable'), shedder.refuses('default'), shedder.refuses('critical')];
    });
    expect(seen).toEqual([
      ['sheddable', true, false, false],
      ['default', true, true, false],
      ['default', true, true, false],
      ['default', true, true, false],
      ['sheddable', true, false, false],
      ['none', false, false, false],
      ['none', false, false, false],
    ]);
  });

  it('under a square-wave load changes class at most once per interval', () => {
    // On for 1, 2 and 3 intervals, off as long, 300 intervals in all.
    const delays = Array.from({ length: 300 }, (_, i) => {
      const period = 2 * (1 + (Math.floor(i / 100) % 3));
      return i % period < period / 2 ? 400 : 5;
    });
    const { shedder, changes } = shedderOf(replay(delays));
    const levels = delays.map(() => (shedder.sample(), ['none', 'sheddable', 'default'].indexOf(shedder.level)));
    const steps = levels.map((l, i) => Math.abs(l - (i === 0 ? 0 : levels[i - 1])));
    expect(Math.max(...steps)).toBe(1);
    expect(changes.length).toBe(steps.filter((s) => s === 1).length);
    expect(changes.length).toBeLessThanOrEqual(delays.length);
  });

  it('at 2× overload with a critical/sheddable mix, refuses no critical call while any sheddable one is admitted', () => {
    // A server of capacity 100 calls per interval; each interval offers 200 (100 critical, 100 sheddable).
    // Admitting more than capacity stalls the loop by 10 ms per call beyond it, read at the next sample.
    let backlog = 0;
    const source: PressureSource = { read: () => ({ eventLoopDelayMs: backlog * 10, eventLoopUtilization: 0.5, heapUsedRatio: 0.1 }) };
    const { shedder } = shedderOf(source);
    const intervals: Array<{ criticalRefused: number; sheddableAdmitted: number }> = [];
    for (let i = 0; i < 200; i++) {
      let admitted = 0;
      let criticalRefused = 0;
      let sheddableAdmitted = 0;
      for (let n = 0; n < 100; n++) {
        if (shedder.refuses('critical')) criticalRefused++;
        else admitted++;
        if (!shedder.refuses('sheddable')) {
          admitted++;
          sheddableAdmitted++;
        }
      }
      backlog = Math.max(0, admitted - 100);
      intervals.push({ criticalRefused, sheddableAdmitted });
      shedder.sample();
    }
    expect(intervals.filter((x) => x.sheddableAdmitted > 0 && x.criticalRefused > 0)).toEqual([]);
    expect(intervals.reduce((sum, x) => sum + x.criticalRefused, 0)).toBe(0);
    // Sheddable calls do get in whenever the shedder has stepped down: it is not refusing all along.
    expect(intervals.filter((x) => x.sheddableAdmitted > 0).length).toBeGreaterThan(1);
  });
});

describe('loadShedding options', () => {
  it.each([
    [{ eventLoopDelayMs: 0 }, 'RateLimitModule options: loadShedding.eventLoopDelayMs: 0 must be a number of ms above 0, for example 100.'],
    [
      { eventLoopUtilization: 1.5 },
      'RateLimitModule options: loadShedding.eventLoopUtilization: 1.5 must be a ratio in (0, 1], for example 0.9.',
    ],
    [{ heapUsedRatio: -1 }, 'RateLimitModule options: loadShedding.heapUsedRatio: -1 must be a ratio in (0, 1], for example 0.9.'],
    [
      { sampleIntervalMs: 5 },
      'RateLimitModule options: loadShedding.sampleIntervalMs: 5 must be a whole number of ms ≥ 10, for example 1000.',
    ],
    [
      { maxEventLoopDelay: 100 },
      "RateLimitModule options: loadShedding: unknown field 'maxEventLoopDelay'; known fields are eventLoopDelayMs, eventLoopUtilization, heapUsedRatio, sampleIntervalMs.",
    ],
  ])('rejects %j at bootstrap, naming the field', (loadShedding, message) => {
    expect(() => validateModuleOptions({ loadShedding } as RateLimitModuleOptions)).toThrow(message);
  });

  it('watches the heap only when heapUsedRatio is set', () => {
    const heavy: PressureSource = { read: () => ({ eventLoopDelayMs: 0, eventLoopUtilization: 0, heapUsedRatio: 0.95 }) };
    const unwatched = shedderOf(heavy).shedder;
    unwatched.sample();
    const watched = shedderOf(heavy, { heapUsedRatio: 0.9 }).shedder;
    watched.sample();
    expect([unwatched.level, watched.level]).toEqual(['none', 'sheddable']);
  });
});
