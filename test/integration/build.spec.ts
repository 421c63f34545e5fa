/**
 * The published artefact: `npm run build` (nest build) must copy every Lua script next to the compiled
 * JavaScript (the algorithms read them at load time, so a missing one breaks the package only once
 * installed), and `dist/` must load from CommonJS and expose the public entry points.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const LIB = join(ROOT, 'lib');
const DIST = join(ROOT, 'dist');

/** Relative paths (with `/`) of the files under `dir` whose name ends with `suffix`. */
function filesUnder(dir: string, suffix: string): string[] {
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[])
    .filter((entry) => entry.isFile() && entry.name.endsWith(suffix))
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)).split(sep).join('/'))
    .sort();
}

function run(command: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += String(chunk)));
    child.stderr.on('data', (chunk) => (output += String(chunk)));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

describe('npm run build', () => {
  beforeAll(async () => {
    const { code, output } = await run('npm', ['run', 'build']);
    if (code !== 0) throw new Error(`npm run build failed (exit ${code}):\n${output}`);
  }, 180_000);

  test('dist/ holds every .lua file of lib/, at the same relative path, byte for byte', () => {
    const inLib = filesUnder(LIB, '.lua');
    expect(inLib).toEqual(expect.arrayContaining(['algorithms/decide.lua', 'algorithms/bucket.lua']));
    expect(inLib.length).toBeGreaterThanOrEqual(9);
    expect(filesUnder(DIST, '.lua')).toEqual(inLib);
    for (const file of inLib) expect(readFileSync(join(DIST, file), 'utf8')).toBe(readFileSync(join(LIB, file), 'utf8'));
  });

  test('every .ts of lib/ has its .js and .d.ts in dist/', () => {
    const sources = filesUnder(LIB, '.ts').filter((f) => !f.endsWith('.d.ts'));
    const js = new Set(filesUnder(DIST, '.js'));
    const dts = new Set(filesUnder(DIST, '.d.ts'));
    expect(sources.filter((f) => !js.has(f.replace(/\.ts$/, '.js')) || !dts.has(f.replace(/\.ts$/, '.d.ts')))).toEqual([]);
  });

  test('require(dist) loads and exposes RateLimitModule and RateLimiterService, and none of the internals', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const dist = require(DIST) as Record<string, unknown>;
    const internals = ['MemoryStore', 'RedisStore', 'ResilientStore', 'SheddingStore', 'SlicingStore', 'SLICE_LIFETIME_MS'];
    internals.push('RateLimitEngine', 'RateLimitAlgorithmRegistry', 'RATE_LIMIT_STORE');
    expect(internals.filter((name) => name in dist)).toEqual([]);
    expect(typeof dist.RateLimitModule).toBe('function');
    expect(typeof dist.RateLimiterService).toBe('function');
    expect(typeof (dist.RateLimitModule as { forRoot?: unknown }).forRoot).toBe('function');
    expect(typeof (dist.RateLimitModule as { forRootAsync?: unknown }).forRootAsync).toBe('function');
  });

  test('the main entry, and a memory-store app booted on it, load no Redis client', () => {
    const script = `
      require('reflect-metadata');
      const { Test } = require('@nestjs/testing');
      const { RateLimitModule, RateLimiterService } = require(${JSON.stringify(DIST)});
      (async () => {
        const app = await Test.createTestingModule({ imports: [RateLimitModule.forRoot()] }).compile();
        await app.init();
        const d = await app.get(RateLimiterService).consume({ algorithm: 'gcra', limit: 1, window: '1s' }, 'k');
        await app.close();
        const clients = Object.keys(require.cache).filter((p) => /node_modules[\\/](ioredis|redis|@redis|@valkey)[\\/]/.test(p));
        console.log(JSON.stringify({ allowed: d.allowed, clients }));
      })();`;
    const result = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' });
    expect(result.stderr).toBe('');
    expect(JSON.parse(result.stdout.trim().split('\n').pop()!)).toEqual({ allowed: true, clients: [] });
  });

  test('every subpath of package.json "exports" loads from plain Node by the package name; only its own entry loads an optional peer', () => {
    // Records every module name required, then loads one entry (a package may require itself by its name).
    const load = (entry: string) => {
      const script = `
        const Module = require('node:module');
        const requested = new Set();
        const load = Module._load;
        // Only what our own files require: a peer may load others itself (prom-client 15 loads @opentelemetry/api).
        const ours = ${JSON.stringify(join(ROOT, 'dist'))};
        Module._load = function (request, parent, ...rest) {
          if (parent && parent.filename && parent.filename.startsWith(ours)) requested.add(request);
          return load.call(this, request, parent, ...rest);
        };
        const exported = Object.keys(require(${JSON.stringify(entry)})).sort();
        const peers = ['prom-client', '@nestjs/terminus', '@nestjs/event-emitter', '@opentelemetry/api', 'redis', '@redis/client', '@valkey/valkey-glide', 'jest', '@jest/globals'].filter((p) => requested.has(p));
        console.log(JSON.stringify({ exported, peers }));
      `;
      const result = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' });
      expect(result.stderr).toBe('');
      return JSON.parse(result.stdout) as { exported: string[]; peers: string[] };
    };
    expect(load('nestjs-redis-ratelimit').peers).toEqual([]);
    expect(load('nestjs-redis-ratelimit/testing')).toEqual({
      exported: [
        'RATE_LIMIT_TEST_START',
        'RateLimitTestClock',
        'RateLimitTestingModule',
        'expectNotRateLimited',
        'expectRateLimited',
        'readRateLimitHeaders',
      ],
      peers: [],
    });
    expect(load('nestjs-redis-ratelimit/prometheus')).toEqual({
      exported: ['RATE_LIMIT_PROMETHEUS_OPTIONS', 'RateLimitMetrics', 'RateLimitPrometheusModule'],
      peers: ['prom-client'],
    });
    expect(load('nestjs-redis-ratelimit/terminus')).toEqual({ exported: ['RateLimitHealthIndicator'], peers: ['@nestjs/terminus'] });
    expect(load('nestjs-redis-ratelimit/event-emitter')).toEqual({
      exported: ['RATE_LIMIT_EVENTS', 'RateLimitEventEmitterBridge', 'RateLimitEventEmitterModule'],
      peers: ['@nestjs/event-emitter'],
    });
    expect(load('nestjs-redis-ratelimit/opentelemetry')).toEqual({
      exported: [
        'ATTR_ERROR_TYPE',
        'ATTR_RATELIMIT_LIMIT',
        'ATTR_RATELIMIT_OUTCOME',
        'ATTR_RATELIMIT_POLICY',
        'ATTR_RATELIMIT_REASON',
        'ATTR_RATELIMIT_REMAINING',
        'ATTR_RATELIMIT_RETRY_AFTER_MS',
        'EVENT_RATELIMIT_NEAR_LIMIT',
        'EVENT_RATELIMIT_REJECTED',
        'METRIC_RATELIMIT_DECISIONS',
        'METRIC_RATELIMIT_DECISION_DURATION',
        'METRIC_RATELIMIT_NEAR_LIMIT',
        'METRIC_RATELIMIT_STORE_ERRORS',
        'RATE_LIMIT_OPENTELEMETRY_OPTIONS',
        'RateLimitOpenTelemetry',
        'RateLimitOpenTelemetryModule',
      ],
      peers: ['@opentelemetry/api'],
    });
  });

  test('plain Node (CommonJS, no transform) loads the package by its main entry and decides from the copied scripts', () => {
    const script = `
      const pkg = require(${JSON.stringify(ROOT)});
      // The internals the module wires together, by their paths in dist/ (the root exports only the public surface).
      const dist = (path) => require(${JSON.stringify(DIST)} + '/' + path);
      const registry = new (dist('algorithms/algorithm.registry').RateLimitAlgorithmRegistry)();
      const names = registry.all().map((a) => a.name);
      const luaBytes = registry.all().every((a) => a.lua.includes('ALG[' + a.id + ']'));
      const store = new (dist('stores/memory/memory.store').MemoryStore)({ clock: () => 1000 });
      const service = new pkg.RateLimiterService(new (dist('pipeline/rate-limit.engine').RateLimitEngine)(store), registry, {});
      service.consume({ algorithm: 'gcra', limit: 2, window: 1000 }, 'k').then((d) => {
        console.log(JSON.stringify({ module: typeof pkg.RateLimitModule, service: typeof pkg.RateLimiterService, names, luaBytes, d }));
      });
    `;
    const result = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({
      module: 'function',
      service: 'function',
      names: ['fixed-window', 'sliding-window', 'sliding-log', 'token-bucket', 'gcra', 'leaky-bucket', 'concurrency'],
      luaBytes: true,
      d: { allowed: true, policy: 'default', limit: 2, remaining: 1, resetMs: 500, moreQuotaMs: 500, retryAfterMs: 0 },
    });
  });

  test('every source map carries its sources, so a stack trace into dist/ reads TypeScript without lib/', () => {
    const maps = filesUnder(DIST, '.js.map');
    expect(maps.length).toBe(filesUnder(DIST, '.js').length);
    const missing = maps.filter((file) => {
      const map = JSON.parse(readFileSync(join(DIST, file), 'utf8')) as { sources: string[]; sourcesContent?: string[] };
      return map.sourcesContent?.length !== map.sources.length || map.sourcesContent.some((source) => !source);
    });
    expect(missing).toEqual([]);
  });

  test('dist/ts5.3 mirrors every declaration, with each package import resolved as an ES module import', () => {
    const plain = filesUnder(DIST, '.d.ts').filter((file) => !file.startsWith('ts5.3/'));
    expect(filesUnder(join(DIST, 'ts5.3'), '.d.ts')).toEqual(plain);
    const exception = readFileSync(join(DIST, 'ts5.3', 'rate-limit.exception.d.ts'), 'utf8');
    expect(exception).toContain("import type { HttpException } from '@nestjs/common' with { 'resolution-mode': 'import' };");
    const imports = plain.flatMap((file) => readFileSync(join(DIST, 'ts5.3', file), 'utf8').split('\n'));
    expect(imports.filter((line) => /^import .* from '[^.]/.test(line) && !line.endsWith("with { 'resolution-mode': 'import' };"))).toEqual(
      [],
    );
  });
});
