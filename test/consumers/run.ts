/**
 * The consumer test: the library as users install it. `npm pack` builds the tarball, and each Nest line gets
 * a fresh app that installs it with plain `npm install` (no overrides, no --legacy-peer-deps), has exactly one
 * copy of Nest, compiles with its own TypeScript (skipLibCheck off), and boots on Express and Fastify against
 * the memory store and a real Redis, where a limited route answers 200, 200, 429 with Retry-After while
 * exempt routes pass; against a Redis nothing answers for, the terminus health check reads down. The
 * declarations are also type-checked under node10, node16, nodenext and bundler resolution. A line with
 * optional peers reads what the library's event-emitter and Prometheus modules counted; a line with test runners
 * runs README › "Testing your app" under jest (with the README's jest config) and vitest.
 *
 * Run: `npm run test:consumers` (needs the npm registry and redis-server). CONSUMER_LINES=nest-11,nest-12 runs
 * some lines only; CONSUMER_KEEP=1 keeps the apps' folders; CONSUMER_README=<file> tests another README's
 * jest config (a draft).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startRedis, type RedisProcess } from '../support/redis-server';
import { run, timed } from './exec';
import { CONSUMER_LINES, type ConsumerLine } from './lines';
import { optionalPeerFailures } from './optional-peers';
import { runTests } from './test-runners';
import { writeApp } from './write-app';

const ROOT = join(__dirname, '..', '..');

interface Outcome {
  line: string;
  installS: number;
  buildS: number;
  bootsMs: number[];
  checks: Check[];
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

/** Starts the app and resolves with its port once it listens; the child is killed by the caller. */
function boot(dir: string, env: NodeJS.ProcessEnv): Promise<{ port: number; stop: () => Promise<void> }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['dist/main.js'], {
      cwd: dir,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
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
      const match = /LISTENING (\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve({ port: Number(match[1]), stop });
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

/** A named check of one line: passes, or fails with what went wrong. */
interface Check {
  name: string;
  failures: string[];
}

async function testLine(line: ConsumerLine, tarball: string, redis: RedisProcess, work: string): Promise<Outcome> {
  const dir = join(work, line.name);
  const outcome: Outcome = { line: line.name, installS: 0, buildS: 0, bootsMs: [], checks: [] };
  const check = async (name: string, work: () => Promise<string[]>): Promise<void> => {
    const failures = await work().catch((error: unknown) => [error instanceof Error ? error.message : String(error)]);
    outcome.checks.push({ name, failures });
  };
  writeApp(dir, line, tarball);
  const [installed, installMs] = await timed(() => run('npm', ['install', '--no-audit', '--no-fund'], dir));
  outcome.installS = installMs / 1000;
  const engines = engineWarnings(installed);
  if (engines.length > 0) console.log(`[${line.name}] npm warns EBADENGINE (Node ${process.versions.node}): ${engines.join(', ')}`);
  await check('one copy of Nest', async () =>
    ['@nestjs/core', '@nestjs/common'].flatMap((name) => {
      const copies = copiesOf(dir, name);
      return copies.length === 1 ? [] : [`${name}: ${copies.length} copies installed (${copies.join(', ')}), expected exactly 1`];
    }),
  );
  console.log(`[${line.name}] installed ${JSON.stringify(installedVersions(dir))} in ${outcome.installS.toFixed(1)} s`);
  const tsc = join(dir, 'node_modules', 'typescript', 'bin', 'tsc');
  const [, buildMs] = await timed(() => run(process.execPath, [tsc, '-p', 'tsconfig.build.json'], dir));
  outcome.buildS = buildMs / 1000;
  for (const { resolution } of line.typeChecks) {
    await check(
      `declarations under ${resolution}`,
      async () => (await run(process.execPath, [tsc, '-p', `tsconfig.${resolution}.json`], dir), []),
    );
  }
  const stores = { memory: {}, redis: line.passesOwnClient ? { REDIS_CLIENT: redis.url } : { REDIS_URL: redis.url } };
  for (const adapter of ['express', 'fastify']) {
    for (const [store, env] of Object.entries(stores) as Array<['memory' | 'redis', NodeJS.ProcessEnv]>) {
      await check(`${adapter} + ${store}`, async () => {
        const prefix = `consumer-${line.name}-${adapter}-${Date.now()}`;
        const [app, bootMs] = await timed(() => boot(dir, { ADAPTER: adapter, PREFIX: prefix, ...env }));
        outcome.bootsMs.push(bootMs);
        try {
          return await exercise(app.port, store, line);
        } finally {
          await app.stop();
        }
      });
    }
  }
  for (const runner of line.testRunners ?? []) {
    await check(`README › Testing your app under ${runner}`, () => runTests(runner, dir));
  }
  await check('health down while Redis is unreachable', async () => {
    const [app, bootMs] = await timed(async () => boot(dir, { REDIS_URL: `redis://127.0.0.1:${await freePort()}` }));
    outcome.bootsMs.push(bootMs);
    try {
      return await healthDown(app.port);
    } finally {
      await app.stop();
    }
  });
  return outcome;
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

async function main(): Promise<void> {
  const only = process.env.CONSUMER_LINES?.split(',');
  const lines = CONSUMER_LINES.filter((line) => !only || only.includes(line.name));
  const work = mkdtempSync(join(tmpdir(), 'rl-consumers-'));
  const redis = await startRedis();
  const outcomes: Outcome[] = [];
  try {
    const tarball = await pack(work);
    console.log(`packed ${tarball}`);
    for (const line of lines) {
      try {
        outcomes.push(await testLine(line, tarball, redis, work));
      } catch (error) {
        const failure = error instanceof Error ? error.message : String(error);
        outcomes.push({
          line: line.name,
          installS: 0,
          buildS: 0,
          bootsMs: [],
          checks: [{ name: 'install and build', failures: [failure] }],
        });
      }
    }
  } finally {
    await redis.stop();
    if (!process.env.CONSUMER_KEEP) rmSync(work, { recursive: true, force: true });
    else console.log(`apps kept in ${work}`);
  }
  console.log('\n| line | npm install s | tsc build s | boot ms (median) | checks |\n| --- | --- | --- | --- | --- |');
  for (const o of outcomes) {
    const boots = [...o.bootsMs].sort((a, b) => a - b);
    const median = boots.length ? boots[Math.floor(boots.length / 2)].toFixed(0) : '-';
    const failed = o.checks.filter((c) => c.failures.length > 0).length;
    console.log(
      `| ${o.line} | ${o.installS.toFixed(1)} | ${o.buildS.toFixed(1)} | ${median} | ${o.checks.length - failed} of ${o.checks.length} |`,
    );
  }
  const checks = outcomes.flatMap((o) => o.checks.map((c) => ({ ...c, line: o.line })));
  for (const c of checks) for (const failure of c.failures) console.log(`\n[${c.line}] ${c.name}: ${failure}`);
  const failed = checks.filter((c) => c.failures.length > 0).length;
  console.log(`\n${checks.length - failed} passed, ${failed} failed`);
  process.exitCode = failed > 0 ? 1 : 0;
}

void main();
