/**
 * The tables of bench/decisions.ts: one per scenario ("× best peer" = a cell's decisions/s over the fastest
 * peer's in the same round, median of rounds), then the targets and what each added policy costs.
 */
import type { Cell } from './decision-cell';
import { ALGORITHMS, INLINE, RLF, SCENARIOS, type Scenario, type Variant } from './decision-variants';
import { fmtMicros, fmtRate, fmtRatio, fmtRatios, heading, median, table } from './report';
import { settings } from './settings';

export const CONCURRENCIES = [1, 64, 256] as const;
/** Algorithms the targets report without a goal: their state is a sorted set (a log, or leases). */
const WITHOUT_GOAL = new Set(['sliding-log', 'concurrency']);

/** Cells of every round, by scenario, concurrency and variant. */
export class DecisionResults {
  private readonly cells = new Map<string, Cell[]>();

  add(scenario: Scenario, concurrency: number, variant: string, cell: Cell): void {
    const id = `${scenario}|${concurrency}|${variant}`;
    this.cells.set(id, [...(this.cells.get(id) ?? []), cell]);
  }

  get(scenario: Scenario, concurrency: number, variant: string): Cell[] {
    return this.cells.get(`${scenario}|${concurrency}|${variant}`) ?? [];
  }
}

/** Per-round decisions/s of the fastest of `peers` (NaN where none ran). */
function bestPerRound(results: DecisionResults, scenario: Scenario, concurrency: number, peers: readonly Variant[]): number[] {
  const rounds = Math.max(0, ...peers.map((p) => results.get(scenario, concurrency, p.name).length));
  return Array.from({ length: rounds }, (_, i) =>
    Math.max(...peers.map((p) => results.get(scenario, concurrency, p.name)[i]?.perSec ?? NaN).filter(Number.isFinite)),
  );
}

/** Per-round ratios of a variant's decisions/s to its reference (the best peer, or rlf's memory limiter). */
function ratios(results: DecisionResults, list: readonly Variant[], scenario: Scenario, concurrency: number, variant: Variant): number[] {
  const peerRole = variant.role === 'memory' || variant.role === 'memory-peer' ? 'memory-peer' : 'peer';
  const peers = list.filter((v) => v.role === peerRole && v.scenarios.includes(scenario));
  const best = bestPerRound(results, scenario, concurrency, peers);
  return results.get(scenario, concurrency, variant.name).map((cell, i) => cell.perSec / (best[i] ?? NaN));
}

function cpu(cells: readonly Cell[]): string {
  const m = (pick: (c: Cell) => number) => median(cells.map(pick)).toFixed(1);
  return `${m((c) => c.nodeCpuUs)} / ${m((c) => c.redisCpuUs)} (${m((c) => c.redisCmdUs)})`;
}

export function report(list: readonly Variant[], results: DecisionResults, scenarios: readonly Scenario[], fallbacks: number): void {
  heading('Decisions/s without HTTP', {
    rounds: settings.rounds,
    cellMs: settings.decisionMs,
    note:
      'median decisions/s of rounds (× best peer: over the fastest rate-limiter-flexible Redis variant of the same cell and round, median of rounds; memory stores over RateLimiterMemory); ' +
      'latency = p50 / p99 per decision, medians of rounds; CPU µs per decision = node / redis (INFO cpu) (redis command time, INFO commandstats)',
  });
  for (const scenario of scenarios) {
    console.log(`\n### ${SCENARIOS[scenario].title}\n`);
    const rows = list
      .filter((v) => v.scenarios.includes(scenario))
      .map((v) => {
        const at = (c: number) => results.get(scenario, c, v.name);
        return [
          v.name,
          ...CONCURRENCIES.map(
            (c) => `${fmtRate(median(at(c).map((x) => x.perSec)))} (${fmtRatio(median(ratios(results, list, scenario, c, v)))})`,
          ),
          ...CONCURRENCIES.map((c) => `${fmtMicros(median(at(c).map((x) => x.p50)))} / ${fmtMicros(median(at(c).map((x) => x.p99)))}`),
          cpu(at(1)),
          cpu(at(64)),
        ];
      });
    const header = [
      'variant',
      ...CONCURRENCIES.map((c) => `c=${c} dec/s (× best peer)`),
      ...CONCURRENCIES.map((c) => `c=${c} p50 / p99`),
      'c=1 CPU µs/dec',
      'c=64 CPU µs/dec',
    ];
    console.log(table(header, rows));
  }
  console.log(
    `\nOur variants go through the module's store stack (RedisStore + ResilientStore + SheddingStore); decisions answered by a fallback instead of Redis: ${fallbacks}.`,
  );
  targets(list, results, scenarios);
  policyCosts(list, results, scenarios);
}

function targets(list: readonly Variant[], results: DecisionResults, scenarios: readonly Scenario[]): void {
  const rows: string[][] = [];
  const ours = ALGORITHMS.flatMap((name) => list.filter((v) => v.name === name));
  const target = (label: string, goal: number | undefined, values: number[]) =>
    rows.push([
      label,
      goal === undefined ? '—' : `≥ ${goal.toFixed(1)}×`,
      fmtRatios(values),
      goal === undefined ? '' : verdict(median(values), goal),
    ]);
  // Issue #30's goals; sliding-log and concurrency (sorted sets, a log or leases) are reported without one.
  const goals: Array<[Scenario, number, number]> = [
    ['keys', 1, 1.0],
    ['keys', 64, 1.5],
    ['keys-1m', 1, 1.0],
    ['keys-1m', 64, 1.5],
    ['cluster', 1, 1.0],
    ['cluster', 64, 1.5],
    ['unbatched', 1, 1.0],
    ['unbatched', 64, 1.0],
    ['hot-reject', 64, 1.0],
  ];
  for (const [scenario, c, goal] of goals) {
    if (!scenarios.includes(scenario)) continue;
    for (const v of ours)
      target(
        `${v.name} vs best peer, ${scenario}, c=${c}`,
        WITHOUT_GOAL.has(v.name) ? undefined : goal,
        ratios(results, list, scenario, c, v),
      );
  }
  for (const v of list.filter((x) => x.role === 'memory')) {
    for (const c of [1, 64])
      if (scenarios.includes('keys')) target(`${v.name} vs RateLimiterMemory, keys, c=${c}`, 1, ratios(results, list, 'keys', c, v));
  }
  for (const scenario of ['policies-2', 'policies-8'] as const) {
    if (!scenarios.includes(scenario)) continue;
    for (const v of ours) target(`${v.name} vs best peer, ${scenario}, c=64`, undefined, ratios(results, list, scenario, 64, v));
  }
  const inline = list.find((v) => v.name === INLINE);
  if (inline && scenarios.includes('keys') && list.some((v) => v.name === 'fixed-window')) {
    for (const c of [1, 64]) {
      const own = results.get('keys', c, INLINE);
      const reused = results.get('keys', c, 'fixed-window');
      target(
        `inline policy object vs reused, keys, c=${c}: decisions/s`,
        undefined,
        own.map((x, i) => x.perSec / reused[i]?.perSec),
      );
      target(
        `inline policy object vs reused, keys, c=${c}: Node CPU per decision (reused ÷ inline)`,
        undefined,
        own.map((x, i) => reused[i]?.nodeCpuUs / x.nodeCpuUs),
      );
    }
  }
  console.log('\n### Targets (per-round ratios in this run)\n');
  console.log(table(['target', 'goal', 'median (rounds)', 'met'], rows));

  // Redis's own time per single-policy decision: alone (c=1, the one-policy script) and batched (c=64), against
  // rate-limiter-flexible's script in the same cells: fixed-window at most rlf's, the others 1.25× of it.
  const redisRows: string[][] = [];
  for (const scenario of ['keys', 'cluster', 'unbatched'] as const) {
    if (!scenarios.includes(scenario)) continue;
    const rlfUs = median(results.get(scenario, 1, RLF).map((x) => x.redisCmdUs));
    for (const v of ours) {
      const us = (c: number) => median(results.get(scenario, c, v.name).map((x) => x.redisCmdUs));
      const bound = WITHOUT_GOAL.has(v.name) ? undefined : v.name === 'fixed-window' ? 1 : 1.25;
      const goal = bound === undefined ? '—' : `≤ ${bound}× rlf (${(bound * rlfUs).toFixed(1)})`;
      const met = bound === undefined ? '' : us(1) <= bound * rlfUs ? 'yes' : 'no';
      redisRows.push([`${v.name}, ${scenario}`, goal, us(1).toFixed(1), us(64).toFixed(1), met]);
    }
    for (const peer of list.filter((v) => v.role === 'peer' && v.scenarios.includes(scenario))) {
      const us = (c: number) => median(results.get(scenario, c, peer.name).map((x) => x.redisCmdUs));
      redisRows.push([`${peer.name}, ${scenario}`, '', us(1).toFixed(1), us(64).toFixed(1), '']);
    }
  }
  if (redisRows.length > 0) {
    console.log('\n### Redis command time per single-policy decision (µs, INFO commandstats, medians of rounds)\n');
    console.log(table(['variant', 'goal (c=1)', 'c=1', 'c=64', 'met'], redisRows));
  }
}

/** Node and Redis CPU per decision at c=64 with 1, 2 and 8 policies: what each added policy costs. */
function policyCosts(list: readonly Variant[], results: DecisionResults, scenarios: readonly Scenario[]): void {
  const counts = (['keys', 'policies-2', 'policies-8'] as const).filter((s) => scenarios.includes(s));
  if (counts.length < 2) return;
  const rows = list
    .filter((v) => v.role === 'ours' || v.role === 'peer')
    .filter((v) => counts.every((s) => v.scenarios.includes(s)))
    .map((v) => [v.name, ...counts.map((s) => cpu(results.get(s, 64, v.name)))]);
  console.log('\n### CPU µs per decision by policies per decision (c=64: node / redis (redis command time))\n');
  console.log(
    table(['variant', ...counts.map((s) => `${SCENARIOS[s].policies} ${SCENARIOS[s].policies === 1 ? 'policy' : 'policies'}`)], rows),
  );
}

function verdict(value: number, goal: number): string {
  if (!Number.isFinite(value)) return 'n/a';
  return value >= goal ? 'yes' : 'no';
}
