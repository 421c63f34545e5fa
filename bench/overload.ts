/**
 * A real overload (issue #40, "Done when"): a Nest app on Fastify whose handler waits on a simulated database
 * of 20 permits held 50 ms each (capacity 400 queries/s, queueing beyond; bench/overload-app.ts), driven by
 * autocannon at 3× that capacity, once without a limit and once with an adaptive limit on the route. The
 * unloaded p99 is measured first, at a quarter of the database's permits in flight. For each run it prints
 * p50 / p99 of the admitted requests (2xx), goodput (2xx per second, as % of capacity) and refusals, and
 * checks the targets for the adaptive run: p99 ≤ 3× the unloaded p99, goodput ≥ 80 % of capacity.
 * A benchmark, not a test: it exits 0 whatever it measures.
 *
 * Autocannon runs here, the app in its own process. Each connection waits for its response, so the offered
 * rate is met only while answers come back: without a limit the connections pile up in the database's
 * queue (latency = connections / capacity); with one, the excess is refused at once and they come back.
 *
 *   npm run bench:overload   (BENCH_OVERLOAD_SECONDS (30), BENCH_OVERLOAD_UNLOADED_SECONDS (10),
 *                             BENCH_OVERLOAD_WARMUP_SECONDS (3), BENCH_OVERLOAD_CONNECTIONS (600), BENCH_OVERLOAD_FACTOR (3),
 *                             BENCH_OVERLOAD_DB_CAPACITY (20), BENCH_OVERLOAD_SERVICE_MS (50),
 *                             BENCH_OVERLOAD_STRATEGY (vegas))
 */
import autocannon from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import { get } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { stopChild } from './support/app-process';

function num(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name}=${raw} must be a positive number.`);
  return value;
}

const SECONDS = num('BENCH_OVERLOAD_SECONDS', 30);
const UNLOADED_SECONDS = num('BENCH_OVERLOAD_UNLOADED_SECONDS', 10);
const CONNECTIONS = num('BENCH_OVERLOAD_CONNECTIONS', 600);
const FACTOR = num('BENCH_OVERLOAD_FACTOR', 3);
const DB_CAPACITY = num('BENCH_OVERLOAD_DB_CAPACITY', 20);
const SERVICE_MS = num('BENCH_OVERLOAD_SERVICE_MS', 50);
const STRATEGY = process.env.BENCH_OVERLOAD_STRATEGY ?? 'vegas';
const WARMUP_SECONDS = num('BENCH_OVERLOAD_WARMUP_SECONDS', 3);
/** Autocannon instances a paced load is split into, started evenly through one second (see {@link load}). */
const WAVES = 50;
/** Connections of the unloaded run (and of each warm-up): a quarter of the database's permits, so nothing queues. */
const UNLOADED_CONNECTIONS = Math.max(1, Math.floor(DB_CAPACITY / 4));
/** Queries per second the database can run. */
const CAPACITY_RPS = (DB_CAPACITY * 1000) / SERVICE_MS;

/** What one autocannon run gives back, admitted requests apart. */
interface Run {
  /** Seconds from the first wave's start to the last one's end. */
  elapsed: number;
  /** 2xx responses per second while every wave ran. */
  goodput: number;
  /** Latencies of the 2xx responses, ms, sorted. */
  admitted: number[];
  refused: number;
  errors: number;
  /** Where the app stood at the end of each second of the run. */
  samples: Sample[];
  /** The p99 of the 2xx responses that ended in each second, ms. */
  p99s: number[];
}

/** Boots the app (with an adaptive limit of `strategy`, or none) and resolves with it and its port. */
async function boot(strategy: string | undefined): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', join(__dirname, 'overload-app.ts')], {
    env: {
      ...process.env,
      BENCH_OVERLOAD_ADAPTIVE: strategy ?? '',
      BENCH_OVERLOAD_DB_CAPACITY: String(DB_CAPACITY),
      BENCH_OVERLOAD_SERVICE_MS: String(SERVICE_MS),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the overload app exited with ${code} before listening`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('READY ')) resolve(Number(line.slice(6)));
    });
  });
  return { child, port };
}

/** One `GET` of `path`: the response's headers and body. */
function fetchOnce(port: number, path: string): Promise<{ headers: Record<string, unknown>; body: string } | undefined> {
  return new Promise((resolve) => {
    const req = get({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ headers: res.headers, body }));
    });
    req.on('error', () => resolve(undefined));
  });
}

/** Where the app stood at one moment: the database's queries in flight, and the adaptive limit if any. */
interface Sample {
  inflight: number | undefined;
  limit: number | undefined;
}

async function sample(port: number, limited: boolean): Promise<Sample> {
  const [stats, probe] = await Promise.all([fetchOnce(port, '/stats'), limited ? fetchOnce(port, '/query') : undefined]);
  const inflight = stats && (JSON.parse(stats.body) as { inflight: number }).inflight;
  // The probe's `RateLimit-Policy` states the limit (`q`), admitted or refused.
  const q = /;q=(\d+)/.exec(String(probe?.headers['ratelimit-policy'] ?? ''))?.[1];
  return { inflight, limit: q === undefined ? undefined : Number(q) };
}

/** Samples the app once a second until the returned function is called, for its course over the run. */
function trace(port: number, limited: boolean): () => Promise<Sample[]> {
  const samples: Array<Promise<Sample>> = [];
  const timer = setInterval(() => samples.push(sample(port, limited)), 1000);
  return () => {
    clearInterval(timer);
    return Promise.all(samples);
  };
}

/**
 * Loads `port` with `connections` for `seconds`, at most `rate` requests/s in all when given. Autocannon
 * paces a connection by resetting its count every second, so its connections fire their share together at
 * the start of each second; the load is split into {@link WAVES} instances started evenly through the first
 * second, so that requests arrive in small bursts all through it, as independent clients' would.
 */
async function load(port: number, seconds: number, connections: number, rate?: number, limited = false): Promise<Run> {
  const waves = rate === undefined ? 1 : Math.min(WAVES, connections);
  const admitted: number[] = [];
  /** The 2xx latencies of each second of the run, by when they ended. */
  const perSecond: number[][] = [];
  let refused = 0;
  // Goodput counts from when every wave runs to when the first stops.
  let steady = 0;
  const steadyFrom = performance.now() + 1000;
  const steadyTo = steadyFrom + (seconds - 1) * 1000;
  const stopTracing = trace(port, limited);
  const started = performance.now();
  const results = await Promise.all(
    Array.from({ length: waves }, async (_, i) => {
      await new Promise((resolve) => setTimeout(resolve, (i * 1000) / waves));
      const instance = autocannon({
        url: `http://127.0.0.1:${port}/query`,
        connections: share(connections, waves, i),
        duration: seconds,
        timeout: 30,
        ...(rate !== undefined && { overallRate: share(rate, waves, i) }),
      });
      instance.on('response', (_client, statusCode, _bytes, ms) => {
        if (statusCode < 300) {
          admitted.push(ms);
          const now = performance.now();
          if (now >= steadyFrom && now < steadyTo) steady++;
          (perSecond[Math.floor((now - started) / 1000)] ??= []).push(ms);
        } else refused++;
      });
      return instance;
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const samples = await stopTracing();
  admitted.sort((a, b) => a - b);
  const goodput = steady / (seconds - 1);
  const p99s = samples.map((_, i) =>
    quantile(
      (perSecond[i] ?? []).sort((x, y) => x - y),
      0.99,
    ),
  );
  return { elapsed, goodput, admitted, refused, errors: results.reduce((n, r) => n + r.errors, 0), samples, p99s };
}

/** The `i`-th of `parts` near-equal whole shares of `total`. */
function share(total: number, parts: number, i: number): number {
  return Math.floor(total / parts) + (i < total % parts ? 1 : 0);
}

function quantile(sorted: number[], q: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}

const fixed = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : '–');
const load1 = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');

/** One row of the results table. */
function row(label: string, run: Run): string {
  const goodput = run.goodput;
  const refusedPerS = run.refused / run.elapsed;
  return `| ${label} | ${fixed(quantile(run.admitted, 0.5))} | ${fixed(quantile(run.admitted, 0.99))} | ${fixed(goodput, 0)} | ${fixed((100 * goodput) / CAPACITY_RPS, 0)} % | ${fixed(refusedPerS, 0)} | ${run.errors} |`;
}

async function measure(strategy: string | undefined, seconds: number, connections: number, rate?: number): Promise<Run> {
  const app = await boot(strategy);
  try {
    // Warm-up at a light load (the JIT, Fastify's and Nest's first calls); an adaptive limit learns nothing
    // from it, as it is never half full.
    await load(app.port, WARMUP_SECONDS, UNLOADED_CONNECTIONS);
    return await load(app.port, seconds, connections, rate, strategy !== undefined);
  } finally {
    await stopChild(app.child);
  }
}

async function main(): Promise<void> {
  const offered = FACTOR * CAPACITY_RPS;
  console.log(
    `database: ${DB_CAPACITY} permits × ${SERVICE_MS} ms = ${CAPACITY_RPS} queries/s; offered ${offered} requests/s ` +
      `(${FACTOR}×) over ${CONNECTIONS} connections for ${SECONDS} s; adaptive strategy '${STRATEGY}'`,
  );
  console.log(`load average (1 / 5 / 15 min) before: ${load1()}\n`);

  const unloaded = await measure(undefined, UNLOADED_SECONDS, UNLOADED_CONNECTIONS);
  const without = await measure(undefined, SECONDS, CONNECTIONS, offered);
  const adaptive = await measure(STRATEGY, SECONDS, CONNECTIONS, offered);

  console.log('| run | p50 ms (2xx) | p99 ms (2xx) | goodput /s | of capacity | refused /s | errors |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  console.log(row(`unloaded (${UNLOADED_CONNECTIONS} connections)`, unloaded));
  console.log(row(`${FACTOR}× capacity, no limit`, without));
  console.log(row(`${FACTOR}× capacity, adaptive (${STRATEGY})`, adaptive));

  const unloadedP99 = quantile(unloaded.admitted, 0.99);
  const p99 = quantile(adaptive.admitted, 0.99);
  const goodput = adaptive.goodput / CAPACITY_RPS;
  const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
  console.log(`\nsecond by second (the database's queries in flight and the limit sampled at its end, p99 of the 2xx ended in it):\n`);
  console.log('| s | no limit: in flight | p99 ms | adaptive: limit | in flight | p99 ms |');
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: |');
  for (let i = 0; i < Math.max(without.samples.length, adaptive.samples.length); i++) {
    const [w, a] = [without.samples[i], adaptive.samples[i]];
    console.log(
      `| ${i + 1} | ${w?.inflight ?? '–'} | ${fixed(without.p99s[i] ?? NaN, 0)} | ${a?.limit ?? '–'} | ${a?.inflight ?? '–'} | ${fixed(adaptive.p99s[i] ?? NaN, 0)} |`,
    );
  }
  console.log(`\ntargets with the adaptive limit:`);
  console.log(
    `- p99 ${fixed(p99)} ms ≤ 3 × unloaded p99 ${fixed(unloadedP99)} ms = ${fixed(3 * unloadedP99)} ms: ${verdict(p99 <= 3 * unloadedP99)}`,
  );
  console.log(`- goodput ${fixed(100 * goodput, 0)} % ≥ 80 % of capacity: ${verdict(goodput >= 0.8)}`);
  console.log(`\nload average (1 / 5 / 15 min) after: ${load1()}`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
