/**
 * The tables of bench/http.ts: per adapter, every variant's req/s "× bare" (the bare app measured just
 * before and after it), then the targets as medians of same-round ratios.
 */
import type { HttpVariant, LimitMode } from '../http-app';
import { fmtRate, fmtRatios, heading, median, table } from './report';
import { settings } from './settings';

export interface Load {
  rps: number;
  p50: number;
  p99: number;
  /** Share of responses that were not 2xx (429s when rejecting). */
  non2xx: number;
  errors: number;
  /** The app process's CPU time (user + system) per response, µs: steadier than req/s on a busy box. */
  cpuUs: number;
  /**
   * The system (kernel) part of {@link cpuUs}: mostly the socket writes, about the same for every variant.
   * bench:instructions counts only the user part, which is why its "× bare" is lower than this part's.
   */
  kernelUs: number;
  /**
   * The bare app around this cell: the mean of its cells just before and just after (it runs after every
   * few cells). Ratios use it, so a variant is compared with the box as it was at the time.
   */
  bare?: { rps: number; cpuUs: number };
}

export const MODES: LimitMode[] = ['allow', 'reject'];

/** Loads of every round, by adapter, variant and limit mode. */
export class HttpResults {
  private readonly loads = new Map<string, Load[]>();

  add(adapter: string, variant: HttpVariant, mode: LimitMode, load: Load): void {
    const id = `${adapter}|${variant}|${mode}`;
    this.loads.set(id, [...(this.loads.get(id) ?? []), load]);
  }

  get(adapter: string, variant: HttpVariant, mode: LimitMode): Load[] {
    return this.loads.get(`${adapter}|${variant}|${mode}`) ?? [];
  }
}

/** The framework's own limiters on Redis and in memory: the "native peer" of each adapter. */
const NATIVE_REDIS: Record<string, HttpVariant[]> = {
  fastify: ['fastify-rl-redis', 'fastify-rl-redis-pipelined'],
  express: ['express-rl-redis'],
};
const NATIVE_MEMORY: Record<string, HttpVariant[]> = { fastify: ['fastify-rl-memory'], express: ['express-rl-memory'] };

/** A cell's req/s relative to the bare app around it, so two variants compare without the box's drift. */
function relative(load: Load | undefined): number {
  if (load === undefined) return NaN;
  return load.bare ? load.rps / load.bare.rps : load.rps;
}

export function report(
  variants: readonly HttpVariant[],
  adapters: readonly string[],
  results: HttpResults,
  context: Record<string, unknown>,
): void {
  heading('HTTP: Nest endpoint + guard, autocannon in a separate process', {
    ...context,
    note:
      'req/s median of rounds; "× bare" = median of rounds of req/s ÷ the bare app\'s just before and after; latency p50 / p99 in ms; ' +
      "app CPU = the app process's user + system CPU per response, the system (kernel) part in brackets",
  });
  // Per-round ratios of a variant to a reference: the bare app around it, or other variants (the best of
  // them in each round), each taken relative to the bare app around it.
  const ratios = (adapter: string, variant: HttpVariant, mode: LimitMode, base: HttpVariant | HttpVariant[], baseMode: LimitMode) => {
    const own = results.get(adapter, variant, mode);
    if (base === 'bare') return own.map((r) => (r.bare ? r.rps / r.bare.rps : NaN));
    const bases = (Array.isArray(base) ? base : [base]).map((b) => results.get(adapter, b, baseMode));
    return own.map((r, i) => relative(r) / Math.max(...bases.map((b) => relative(b[i])).filter(Number.isFinite)));
  };
  for (const adapter of adapters) {
    console.log(`\n### ${adapter}\n`);
    const rows: string[][] = [];
    for (const mode of MODES) {
      for (const variant of variants) {
        if (variant === 'bare' && mode === 'reject') continue;
        const runs = results.get(adapter, variant, mode);
        if (runs.length === 0) continue;
        rows.push([
          variant === 'bare' ? 'bare (no limiter)' : `${variant}, ${mode}-all`,
          fmtRate(median(runs.map((r) => r.rps))),
          variant === 'bare' ? '1.00×' : fmtRatios(ratios(adapter, variant, mode, 'bare', 'allow')),
          `${median(runs.map((r) => r.p50)).toFixed(1)} / ${median(runs.map((r) => r.p99)).toFixed(1)}`,
          `${median(runs.map((r) => r.cpuUs)).toFixed(1)} (${median(runs.map((r) => r.kernelUs)).toFixed(1)})`,
          `${(median(runs.map((r) => r.non2xx)) * 100).toFixed(1)}%`,
          String(runs.reduce((n, r) => n + r.errors, 0)),
        ]);
      }
    }
    console.log(
      table(['variant', 'req/s', '× bare (rounds)', 'latency p50 / p99 ms', 'app CPU µs/req (kernel)', 'non-2xx', 'errors'], rows),
    );
  }
  console.log('\n### Targets (per-round ratios in this run)\n');
  const rows: string[][] = [];
  const has = (...names: HttpVariant[]) => names.every((n) => variants.includes(n));
  const target = (label: string, goal: number | undefined, values: number[]) =>
    rows.push([label, goal === undefined ? '—' : `≥ ${goal}×`, fmtRatios(values), goal === undefined ? '' : met(values, goal)]);
  for (const adapter of adapters) {
    const nativeRedis = NATIVE_REDIS[adapter]?.filter((v) => variants.includes(v)) ?? [];
    const nativeMemory = NATIVE_MEMORY[adapter]?.filter((v) => variants.includes(v)) ?? [];
    for (const mode of MODES) {
      const at = `${adapter} ${mode}-all`;
      if (has('ours-redis', 'throttler-redis'))
        target(`${at}: ours-redis vs throttler-redis`, 1.5, ratios(adapter, 'ours-redis', mode, 'throttler-redis', mode));
      if (has('ours-redis') && nativeRedis.length > 0) {
        target(
          `${at}: ours-redis vs ${nativeRedis.join(' / ')} (the better per round)`,
          1.2,
          ratios(adapter, 'ours-redis', mode, nativeRedis, mode),
        );
      }
      if (has('ours-memory') && nativeMemory.length > 0) {
        target(`${at}: ours-memory vs ${nativeMemory.join(' / ')}`, undefined, ratios(adapter, 'ours-memory', mode, nativeMemory, mode));
      }
      if (has('ours-memory', 'bare')) {
        target(`${at}: ours-memory vs bare`, mode === 'allow' ? 0.9 : undefined, ratios(adapter, 'ours-memory', mode, 'bare', 'allow'));
        // The same comparison in app CPU per request (bare µs / ours µs, so higher is better), which the
        // box's drift moves much less than req/s.
        const own = results.get(adapter, 'ours-memory', mode);
        target(
          `${at}: ours-memory vs bare, app CPU per request (bare / ours)`,
          undefined,
          own.map((r) => (r.bare?.cpuUs ?? NaN) / r.cpuUs),
        );
      }
      if (has('ours-memory', 'answer-only', 'bare')) {
        // What answering costs any limiter (the headers; the 429 through Nest's exception path), and what
        // deciding costs on top: a 429 is judged against answer-only, which throws the same exception.
        target(`${at}: answer-only vs bare`, undefined, ratios(adapter, 'answer-only', mode, 'bare', 'allow'));
        target(
          `${at}: ours-memory vs answer-only`,
          mode === 'reject' ? 0.95 : undefined,
          ratios(adapter, 'ours-memory', mode, 'answer-only', mode),
        );
      }
      if (has('ours-memory', 'ours-redis'))
        target(`${at}: ours-memory vs ours-redis`, undefined, ratios(adapter, 'ours-memory', mode, 'ours-redis', mode));
      if (has('ours-memory', 'throttler-memory')) {
        target(`${at}: ours-memory vs throttler-memory`, undefined, ratios(adapter, 'ours-memory', mode, 'throttler-memory', mode));
      }
    }
  }
  console.log(table(['comparison', 'goal', 'median (rounds)', 'met'], rows));
}

function met(ratios: number[], goal: number): string {
  const m = median(ratios);
  return Number.isFinite(m) ? (m >= goal ? 'yes' : 'no') : 'n/a';
}

/** The settings line of the HTTP report. */
export function httpContext(bareEvery: number): Record<string, unknown> {
  return {
    rounds: settings.httpRounds,
    apps: 'one process per variant and adapter, kept for all rounds',
    seconds: settings.httpSeconds,
    warmup: settings.httpWarmupSeconds,
    connections: settings.httpConnections,
    ourAlgorithm: settings.httpAlgorithm,
    window: '60s',
    bare: `measured before the first cell of a round and after every ${bareEvery} cells`,
  };
}
