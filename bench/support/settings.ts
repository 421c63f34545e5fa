/**
 * Every knob of the suite is an environment variable, so a part can be run alone, short or long:
 *   BENCH_QUICK=1           shorter everything (smoke run, ~3 minutes for the whole suite)
 *   BENCH_ROUNDS            interleaved rounds per part (default 3)
 *   BENCH_DECISION_MS       duration of one decisions/s cell (default 400)
 *   BENCH_DECISION_SCENARIOS comma-separated decisions scenarios (default all: keys, keys-1m, hot-allow,
 *                           hot-reject, policies-2, policies-8, unbatched, cluster)
 *   BENCH_HTTP_ROUNDS       interleaved HTTP rounds (default 5); BENCH_HTTP_SECONDS per sample (default 2);
 *                           BENCH_HTTP_WARMUP_SECONDS once per app before the rounds (default 1)
 *   BENCH_HTTP_CONNECTIONS  autocannon connections (default 64)
 *   BENCH_HTTP_ALGORITHM    algorithm of our guard in the HTTP part (default fixed-window)
 *   BENCH_HTTP_ADAPTERS     adapters of the HTTP parts (default fastify,express; fastify for instructions)
 *   BENCH_INSTR_REQUESTS    measured requests per mode in the instructions part (default 4000);
 *                           BENCH_INSTR_WARMUP requests per port before them (default 60000);
 *                           BENCH_INSTR_PARALLEL apps under valgrind at a time (default 2)
 *   BENCH_ONLY              comma-separated variant names to keep (decisions, HTTP and instructions parts)
 *   BENCH_REDIS_PORT        use a running Redis on this port instead of starting one (it gets FLUSHALLed!)
 */
const quick = process.env.BENCH_QUICK === '1';

function num(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name}=${raw} must be a positive number.`);
  return value;
}

export const settings = {
  quick,
  rounds: num('BENCH_ROUNDS', quick ? 2 : 3),
  /** HTTP samples are short, so it takes more rounds. */
  httpRounds: num('BENCH_HTTP_ROUNDS', quick ? 2 : 5),
  decisionMs: num('BENCH_DECISION_MS', quick ? 250 : 400),
  httpSeconds: num('BENCH_HTTP_SECONDS', 2),
  httpWarmupSeconds: num('BENCH_HTTP_WARMUP_SECONDS', 1),
  httpConnections: num('BENCH_HTTP_CONNECTIONS', 64),
  httpAlgorithm: process.env.BENCH_HTTP_ALGORITHM ?? 'fixed-window',
  instrRequests: num('BENCH_INSTR_REQUESTS', quick ? 2_000 : 4_000),
  instrWarmup: num('BENCH_INSTR_WARMUP', quick ? 30_000 : 60_000),
  instrParallel: num('BENCH_INSTR_PARALLEL', 2),
  redisPort: process.env.BENCH_REDIS_PORT ? num('BENCH_REDIS_PORT', 0) : undefined,
  only: process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((s) => s.trim())) : undefined,
};

/** Whether a variant is selected by BENCH_ONLY (all are when it is unset). */
export function selected(name: string): boolean {
  return !settings.only || settings.only.has(name);
}

/** The adapters an HTTP part runs (BENCH_HTTP_ADAPTERS, else `fallback`). */
export function httpAdapters(fallback: string): string[] {
  return (process.env.BENCH_HTTP_ADAPTERS ?? fallback).split(',').map((s) => s.trim());
}
