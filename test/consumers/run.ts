/**
 * The consumer test: the library as users install it. `npm pack` builds the tarball, and each Nest line gets
 * a fresh app that installs it with plain `npm install` (no overrides, no --legacy-peer-deps), has exactly one
 * copy of Nest, compiles with its own TypeScript (skipLibCheck off), and has its declarations type-checked under
 * node10, node16, nodenext and bundler resolution. Then, on every Node major of node-binaries.ts (20, 22, 24), the
 * app boots on Express and Fastify against the memory store and a real Redis, where a limited route answers
 * 200, 200, 429 with Retry-After while exempt routes pass; against a Redis nothing answers for, the terminus
 * health check reads down. A line with optional peers reads what the library's event-emitter and Prometheus
 * modules counted on every boot; a line with test runners runs README › "Testing your app" under jest (with the
 * README's jest config) and vitest, on every Node too. And on Nest 10, 11 and 12, an Express-only and a
 * Fastify-only app follow docs/testing.md › "Testing your app" word for word: its install line, jest config, app
 * and spec for the platform, then jest (guide-apps.ts).
 *
 * What does not depend on the Node version runs once per line, under the Node running this script: npm install,
 * the one-copy check, the app's build and the declaration checks (tsc's verdict is the same on any Node). Lines
 * are independent and run two at a time (CONSUMER_CONCURRENCY), sharing one redis-server.
 *
 * Run: `npm run test:consumers` (needs the npm registry and redis-server). CONSUMER_LINES=nest-11,nest-12 runs
 * some lines only (and those lines' guide apps); CONSUMER_GUIDE=0 skips the guide apps; CONSUMER_NODES=20,24 some Node majors only (see node-binaries.ts for the binaries' cache);
 * CONSUMER_KEEP=1 keeps the apps' folders; CONSUMER_README=<file> tests another README's jest config (a draft).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { freePort, startRedis, type RedisProcess } from '../support/redis-server';
import { run, timed } from './exec';
import { GUIDE_LINES, guideFailures, PLATFORMS, type Platform } from './guide-apps';
import { CONSUMER_LINES, type ConsumerLine } from './lines';
import { nodeBinaries, type NodeBinary } from './node-binaries';
import { optionalPeerFailures } from './optional-peers';
import { runTests } from './test-runners';
import { writeApp } from './write-app';

const ROOT = join(__dirname, '..', '..');
/** Lines in progress at once: an app's install and tsc runs keep about one core busy. */
const CONCURRENCY = Number(process.env.CONSUMER_CONCURRENCY ?? 2);

/** A named check: passes, or fails with what went wrong. */
interface Check {
  name: string;
  failures: string[];
}

/** One line: what ran once (install, build, declaration checks), then one cell per Node binary. */
interface Outcome {
  line: string;
  installS: number;
  buildS: number;
  typeCheckS: number;
  checks: Check[];
  cells: Cell[];
}

/** The app's checks on one Node binary. */
interface Cell {
  node: NodeBinary;
  wallS: number;
  bootsMs: number[];
  checks: Check[];
}

/** Runs `work` and records it as the check `name` in `into`: thrown errors are its failures. */
async function check(into: Check[], name: string, work: () => Promise<string[]>): Promise<void> {
  const failures = await work().catch((error: unknown) => [error instanceof Error ? error.message : String(error)]);
  into.push({ name, failures });
}

/** `npm pack` of this repo (its prepack builds dist/); the tarball's path. */
async function pack(into: string): Promise<string> {
  const output = await run('npm', ['pack', '--pack-destination', into, '--json'], ROOT);
  // The JSON report sits among npm's and the build's own lines.
  const [{ filename }] = JSON.parse(output.slice(output.indexOf('['), output.lastIndexOf(']') + 1)) as Array<{ filename: string }>;
  return join(into, filename);
}

/** Every installed copy of `name` below `dir`'s node_modules (nested ones included). */
function copiesOf(dir: string, name: string): string[] {
  const found: string[] = [];
  const visit = (modules: string): void => {
    if (!existsSync(modules)) return;
    for (const entry of readdirSync(modules)) {
      if (entry.startsWith('.')) continue;
      const scoped = entry.startsWith('@') ? readdirSync(join(modules, entry)).map((sub) => `${entry}/${sub}`) : [entry];
      for (const pkg of scoped) {
        const path = join(modules, pkg);
        if (pkg === name) found.push(path);
        visit(join(path, 'node_modules'));
      }
    }
  };
  visit(join(dir, 'node_modules'));
  return found;
}

/** The environment of a process of `node`: its directory first on PATH, so a `node` it spawns is the same one. */
function nodeEnv(node: NodeBinary, env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { ...process.env, ...env, PATH: `${dirname(node.path)}${delimiter}${process.env.PATH ?? ''}` };
}

/**
 * Starts the app on `node` and resolves with its port once it listens (and says it runs on that Node's version);
 * the child is killed by the caller.
 */
function boot(dir: string, node: NodeBinary, env: NodeJS.ProcessEnv): Promise<{ port: number; stop: () => Promise<void> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(node.path, ['dist/main.js'], { cwd: dir, env: nodeEnv(node, env), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const stop = () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once('exit', () => done());
        child.kill('SIGTERM');
      });
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`app did not listen within 30 s:\n${output}`));
    }, 30_000);
    child.stderr.on('data', (chunk) => (output += String(chunk)));
    child.stdout.on('data', (chunk) => {
      output += String(chunk);
      const match = /LISTENING (\d+) ON (v[\d.]+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        if (match[2] === node.version) return resolve({ port: Number(match[1]), stop });
        void stop();
        reject(new Error(`app runs on Node ${match[2]}, expected ${node.version}`));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`app exited (${code}) before listening:\n${output}`));
    });
  });
}

/** The exact answers a user expects; each mismatch is one failure line. */
async function exercise(port: number, store: 'memory' | 'redis', line: ConsumerLine): Promise<string[]> {
  const failures: string[] = [];
  const get = (path: string) => fetch(`http://127.0.0.1:${port}${path}`);
  const expectEqual = (what: string, actual: unknown, expected: unknown) => {
    if (JSON.stringify(actual) !== JSON.stringify(expected))
      failures.push(`${what}: got ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  };
  const statuses: number[] = [];
  let retryAfter: string | null = null;
  for (let i = 0; i < 3; i++) {
    const res = await get('/limited');
    statuses.push(res.status);
    if (res.status === 429) retryAfter = res.headers.get('retry-after');
    await res.arrayBuffer();
  }
  expectEqual('GET /limited x3', statuses, [200, 200, 429]);
  if (!retryAfter || !/^\d+$/.test(retryAfter) || Number(retryAfter) < 1 || Number(retryAfter) > 60) {
    failures.push(`429 Retry-After: got ${JSON.stringify(retryAfter)}, expected whole seconds from 1 to 60`);
  }
  const free: number[] = [];
  for (let i = 0; i < 3; i++) free.push((await get('/free')).status);
  expectEqual('GET /free x3 (@SkipRateLimit)', free, [200, 200, 200]);
  expectEqual('GET /service (RateLimiterService)', await (await get('/service')).json(), { first: true, second: false });
  const health = (await (await get('/health')).json()) as { status?: string; info?: Record<string, Record<string, unknown>> };
  // With Redis the result also carries what Redis took lately and this process's stalls: numbers, whatever their value.
  const { storeLatencyMs, eventLoopDelayMs, ...result } = health.info?.['rate-limit'] ?? {};
  expectEqual('GET /health', [health.status, result], ['ok', { status: 'up', store }]);
  const timed = store === 'redis' ? ['number', 'number'] : ['undefined', 'undefined'];
  expectEqual('GET /health timings', [typeof storeLatencyMs, typeof eventLoopDelayMs], timed);
  if (line.optionalPeers) failures.push(...(await optionalPeerFailures(port)));
  return failures;
}

/** Installs and builds `line`'s app in `dir` and runs its checks that no Node version changes; throws if it cannot be built. */
async function prepareLine(line: ConsumerLine, tarball: string, dir: string, outcome: Outcome): Promise<void> {
  writeApp(dir, line, tarball);
  const [installed, installMs] = await timed(() => run('npm', ['install', '--no-audit', '--no-fund'], dir));
  outcome.installS = installMs / 1000;
  const engines = engineWarnings(installed);
  if (engines.length > 0) console.log(`[${line.name}] npm warns EBADENGINE (Node ${process.versions.node}): ${engines.join(', ')}`);
  await check(outcome.checks, 'one copy of Nest', async () =>
    ['@nestjs/core', '@nestjs/common'].flatMap((name) => {
      const copies = copiesOf(dir, name);
      return copies.length === 1 ? [] : [`${name}: ${copies.length} copies installed (${copies.join(', ')}), expected exactly 1`];
    }),
  );
  console.log(`[${line.name}] installed ${JSON.stringify(installedVersions(dir))} in ${outcome.installS.toFixed(1)} s`);
  const tsc = join(dir, 'node_modules', 'typescript', 'bin', 'tsc');
  const [, buildMs] = await timed(() => run(process.execPath, [tsc, '-p', 'tsconfig.build.json'], dir));
  outcome.buildS = buildMs / 1000;
  const [, typeCheckMs] = await timed(async () => {
    for (const { resolution } of line.typeChecks) {
      await check(
        outcome.checks,
        `declarations under ${resolution}`,
        async () => (await run(process.execPath, [tsc, '-p', `tsconfig.${resolution}.json`], dir), []),
      );
    }
  });
  outcome.typeCheckS = typeCheckMs / 1000;
  console.log(`[${line.name}] built in ${outcome.buildS.toFixed(1)} s, declarations checked in ${outcome.typeCheckS.toFixed(1)} s`);
}

/** Every check of the built app that runs its code, on one Node binary. */
async function runCell(line: ConsumerLine, dir: string, node: NodeBinary, redis: RedisProcess): Promise<Cell> {
  const cell: Cell = { node, wallS: 0, bootsMs: [], checks: [] };
  const start = performance.now();
  const stores = { memory: {}, redis: line.passesOwnClient ? { REDIS_CLIENT: redis.url } : { REDIS_URL: redis.url } };
  for (const adapter of ['express', 'fastify']) {
    for (const [store, env] of Object.entries(stores) as Array<['memory' | 'redis', NodeJS.ProcessEnv]>) {
      await check(cell.checks, `${adapter} + ${store}`, async () => {
        const prefix = `consumer-${line.name}-node${node.major}-${adapter}-${Date.now()}`;
        const [app, bootMs] = await timed(() => boot(dir, node, { ADAPTER: adapter, PREFIX: prefix, ...env }));
        cell.bootsMs.push(bootMs);
        try {
          return await exercise(app.port, store, line);
        } finally {
          await app.stop();
        }
      });
    }
  }
  for (const runner of line.testRunners ?? []) {
    await check(cell.checks, `README › Testing your app under ${runner}`, () => runTests(runner, dir, node.path, nodeEnv(node)));
  }
  await check(cell.checks, 'health down while Redis is unreachable', async () => {
    const [app, bootMs] = await timed(async () => boot(dir, node, { REDIS_URL: `redis://127.0.0.1:${await freePort()}` }));
    cell.bootsMs.push(bootMs);
    try {
      return await healthDown(app.port);
    } finally {
      await app.stop();
    }
  });
  cell.wallS = (performance.now() - start) / 1000;
  const failed = cell.checks.filter((c) => c.failures.length > 0).length;
  console.log(
    `[${line.name}] Node ${node.version}: ${cell.checks.length - failed} of ${cell.checks.length} checks passed in ${cell.wallS.toFixed(1)} s`,
  );
  return cell;
}

/** One line, start to end: prepared once, then checked on each Node binary in turn. */
async function testLine(line: ConsumerLine, tarball: string, nodes: NodeBinary[], redis: RedisProcess, work: string): Promise<Outcome> {
  const dir = join(work, line.name);
  const outcome: Outcome = { line: line.name, installS: 0, buildS: 0, typeCheckS: 0, checks: [], cells: [] };
  try {
    await prepareLine(line, tarball, dir, outcome);
  } catch (error) {
    outcome.checks.push({ name: 'install and build', failures: [error instanceof Error ? error.message : String(error)] });
    return outcome;
  }
  for (const node of nodes) outcome.cells.push(await runCell(line, dir, node, redis));
  return outcome;
}

/** One app following docs/testing.md on `line`'s Nest and `platform` alone: installed, then jest run, as the guide says. */
async function testGuideApp(line: ConsumerLine, platform: Platform, tarball: string, work: string): Promise<Outcome> {
  const name = `${line.name} guide, ${platform} only`;
  const outcome: Outcome = { line: name, installS: 0, buildS: 0, typeCheckS: 0, checks: [], cells: [] };
  const [, ms] = await timed(() =>
    check(outcome.checks, 'docs/testing.md › Testing your app under jest', () =>
      guideFailures(line, platform, tarball, join(work, `guide-${line.name}-${platform}`)),
    ),
  );
  outcome.installS = ms / 1000;
  const failed = outcome.checks.some((c) => c.failures.length > 0);
  console.log(`[${name}] ${failed ? 'failed' : 'passed'} in ${(ms / 1000).toFixed(1)} s (install and jest)`);
  return outcome;
}

/** `work` on every item, at most `width` at once; results in the items' order. */
async function inPool<T, R>(items: T[], width: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(width, items.length)) }, worker));
  return results;
}

/** A Redis that nothing answers for reads as down (503), on every terminus line the apps run (10 to 12). */
async function healthDown(port: number): Promise<string[]> {
  const res = await fetch(`http://127.0.0.1:${port}/health`);
  const body = (await res.json()) as { status?: string; error?: Record<string, { status?: string; store?: string; message?: unknown }> };
  const detail = body.error?.['rate-limit'];
  const got = [res.status, body.status, detail?.status, detail?.store, typeof detail?.message];
  const expected = [503, 'error', 'down', 'redis', 'string'];
  return JSON.stringify(got) === JSON.stringify(expected)
    ? []
    : [`GET /health: got ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`];
}

/** `package@version (node <range>)` of each EBADENGINE warning in npm's output. */
function engineWarnings(npmOutput: string): string[] {
  const found = npmOutput.matchAll(/package: '([^']+)',\s*npm warn EBADENGINE\s+required: \{ node: '([^']+)' \}/g);
  return [...new Set([...found].map(([, pkg, node]) => `${pkg} (node ${node})`))];
}

/** Versions of the packages that make a line what it is, for those the line installs. */
function installedVersions(dir: string): Record<string, string> {
  const names = [
    '@nestjs/core',
    'ioredis',
    'typescript',
    '@nestjs/terminus',
    'reflect-metadata',
    '@nestjs/event-emitter',
    'prom-client',
    'jest',
    'vitest',
    'vite',
  ];
  const manifests = names.map((name) => join(dir, 'node_modules', name, 'package.json'));
  return Object.fromEntries(
    manifests
      .filter((manifest) => existsSync(manifest))
      .map((manifest) => JSON.parse(readFileSync(manifest, 'utf8')) as { name: string; version: string })
      .map(({ name, version }) => [name, version]),
  );
}

function summary(outcomes: Outcome[], nodes: NodeBinary[]): void {
  const passed = (checks: Check[]) => `${checks.filter((c) => c.failures.length === 0).length} of ${checks.length}`;
  const header = ['line', 'npm install s', 'tsc build s', 'declarations s', 'once', ...nodes.map((n) => `Node ${n.version}`)];
  console.log(`\n| ${header.join(' | ')} |\n|${header.map(() => ' --- |').join('')}`);
  for (const o of outcomes) {
    const cells = nodes.map((node) => {
      const cell = o.cells.find((c) => c.node === node);
      if (!cell) return '-';
      const boots = [...cell.bootsMs].sort((a, b) => a - b);
      const median = boots.length ? boots[Math.floor(boots.length / 2)].toFixed(0) : '-';
      return `${passed(cell.checks)} (${cell.wallS.toFixed(0)} s, boot ${median} ms)`;
    });
    const times = [o.installS, o.buildS, o.typeCheckS].map((s) => s.toFixed(1));
    console.log(`| ${[o.line, ...times, passed(o.checks), ...cells].join(' | ')} |`);
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  const only = process.env.CONSUMER_LINES?.split(',');
  const lines = CONSUMER_LINES.filter((line) => !only || only.includes(line.name));
  const work = mkdtempSync(join(tmpdir(), 'rl-consumers-'));
  const redis = await startRedis();
  let outcomes: Outcome[] = [];
  let nodes: NodeBinary[] = [];
  try {
    const [tarball, binaries] = await Promise.all([pack(work), nodeBinaries()]);
    nodes = binaries;
    console.log(`packed ${tarball}; Node ${nodes.map((n) => n.version).join(', ')}`);
    // The longest lines first (test runners, more declaration checks), so the last one to start is a short one;
    // the guide's apps (one install and one jest run each) after them.
    const weight = (line: ConsumerLine) => line.typeChecks.length + 2 * (line.testRunners?.length ?? 0);
    const order = [...lines].sort((a, b) => weight(b) - weight(a));
    const guides = process.env.CONSUMER_GUIDE === '0' ? [] : lines.filter((line) => GUIDE_LINES.includes(line.name));
    const jobs: Array<() => Promise<Outcome>> = [
      ...order.map((line) => () => testLine(line, tarball, nodes, redis, work)),
      ...guides.flatMap((line) => PLATFORMS.map((platform) => () => testGuideApp(line, platform, tarball, work))),
    ];
    const done = await inPool(jobs, CONCURRENCY, (job) => job());
    outcomes = [...lines.map((line) => done[order.indexOf(line)]), ...done.slice(order.length)];
  } finally {
    await redis.stop();
    if (!process.env.CONSUMER_KEEP) rmSync(work, { recursive: true, force: true });
    else console.log(`apps kept in ${work}`);
  }
  summary(outcomes, nodes);
  const checks = outcomes.flatMap((o) => [
    ...o.checks.map((c) => ({ ...c, where: o.line })),
    ...o.cells.flatMap((cell) => cell.checks.map((c) => ({ ...c, where: `${o.line}, Node ${cell.node.version}` }))),
  ]);
  for (const c of checks) for (const failure of c.failures) console.log(`\n[${c.where}] ${c.name}: ${failure}`);
  const failed = checks.filter((c) => c.failures.length > 0).length;
  const wall = (performance.now() - started) / 1000;
  console.log(`\n${checks.length - failed} passed, ${failed} failed, in ${Math.floor(wall / 60)} min ${(wall % 60).toFixed(0)} s`);
  process.exitCode = failed > 0 ? 1 : 0;
}

void main();
