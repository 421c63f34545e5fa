import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AdaptiveStrategy } from '../../lib/overload/adaptive-strategy';
import { AimdStrategy } from '../../lib/overload/aimd.strategy';
import { GradientStrategy } from '../../lib/overload/gradient.strategy';
import { VegasStrategy } from '../../lib/overload/vegas.strategy';

/**
 * Golden vectors recorded from Netflix concurrency-limits' own Java classes with their defaults (see
 * test/fixtures/adaptive/GoldenVectors.java and generate.sh): each sample is (rtt ms, inflight, drop, the
 * limit Java reported after it). The ports, in their Java-faithful modes, must report the same limit ±1 after
 * every update.
 */
interface Vector {
  strategy: 'vegas' | 'gradient' | 'aimd';
  seed: number;
  jitters: number[];
  samples: Array<[number, number, 0 | 1, number]>;
}

const golden = JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', 'adaptive', 'golden-vectors.json'), 'utf8')) as {
  source: string;
  vectors: Vector[];
};

/** Vegas in Java draws its probe jitter as nextDouble(0.5, 1); the recorded jitters are replayed as draws in [0, 1). */
function javaPort(vector: Vector): AdaptiveStrategy {
  if (vector.strategy === 'vegas') {
    const draws = vector.jitters.map((j) => (j - 0.5) * 2);
    return new VegasStrategy({ probe: 'sample', random: () => draws.shift()! });
  }
  if (vector.strategy === 'gradient') return new GradientStrategy({ baseline: 'java' });
  return new AimdStrategy();
}

describe('adaptive strategies against concurrency-limits (golden vectors)', () => {
  it('were recorded from the Java classes', () => {
    expect(golden.source).toMatch(/^Netflix\/concurrency-limits@[0-9a-f]{40}$/);
    expect(golden.vectors.map((v) => v.strategy).sort()).toEqual([
      'aimd',
      'aimd',
      'aimd',
      'gradient',
      'gradient',
      'gradient',
      'vegas',
      'vegas',
      'vegas',
    ]);
  });

  it.each(golden.vectors.map((v) => [`${v.strategy} (seed ${v.seed}, ${v.samples.length} updates)`, v] as const))(
    '%s gives the Java limit ±1 at every update',
    (_name, vector) => {
      const port = javaPort(vector);
      const off: string[] = [];
      vector.samples.forEach(([rttMs, inflight, drop, expected], i) => {
        const limit = port.update({ rttMs, inflight, dropped: drop === 1 });
        if (Math.abs(limit - expected) > 1) off.push(`update ${i}: ${limit}, Java ${expected}`);
      });
      expect(off).toEqual([]);
      // The vectors move: a port stuck at its initial limit would not pass.
      expect(new Set(vector.samples.map((s) => s[3])).size).toBeGreaterThan(5);
    },
  );

  it('matches exactly, not only within ±1', () => {
    let differing = 0;
    for (const vector of golden.vectors) {
      const port = javaPort(vector);
      for (const [rttMs, inflight, drop, expected] of vector.samples) {
        if (port.update({ rttMs, inflight, dropped: drop === 1 }) !== expected) differing++;
      }
    }
    expect(differing).toBe(0);
  });

  it('exercises Vegas probes (their jitters were all used)', () => {
    for (const vector of golden.vectors.filter((v) => v.strategy === 'vegas')) {
      const draws = vector.jitters.map((j) => (j - 0.5) * 2);
      const port = new VegasStrategy({ probe: 'sample', random: () => draws.shift()! });
      for (const [rttMs, inflight, drop] of vector.samples) port.update({ rttMs, inflight, dropped: drop === 1 });
      expect(vector.jitters.length).toBeGreaterThan(1);
      // The last one recorded is the jitter of the probe still to come, drawn after the one before.
      expect(draws).toHaveLength(0);
    }
  });
});
