/**
 * The published artefact: `npm run build` (nest build) must copy every Lua script next to the compiled
 * JavaScript (the algorithms read them at load time, so a missing one breaks the package only once
 * installed), and `dist/` must load from CommonJS and expose the public entry points. The tarball stays lean
 * (issue #29): no source maps, no comments in the JavaScript (the declarations keep the docs), declarations
 * written once except where TypeScript 5.3+ needs its own copy, at most 300 kB packed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';

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
    // Every request of a Redis client package, by any module, and every such file in require.cache: after the
    // require of the main entry, and again once a forRoot() app (no `redis`) has booted, decided and closed.
    const clients = (body: string) => {
      const script = `
        const Module = require('node:module');
        const CLIENT = /^(ioredis|redis|@redis\\/[^/]+|@valkey\\/valkey-glide)(\\/|$)/;
        const requested = new Set();
        const load = Module._load;
        Module._load = function (request, ...rest) {
          if (CLIENT.test(request)) requested.add(request);
          return load.call(this, request, ...rest);
        };
        const loaded = () => ({
          requested: [...requested],
          cached: Object.keys(require.cache).filter((p) => /node_modules[\\\\/](ioredis|redis|@redis|@valkey)[\\\\/]/.test(p)),
        });
        (async () => { ${body} })().then((result) => console.log(JSON.stringify(result)));`;
      const result = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' });
      expect(result.stderr).toBe('');
      return JSON.parse(result.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
    };
    const memoryApp = clients(`
      const { RateLimitModule, RateLimiterService } = require(${JSON.stringify(DIST)});
      const required = loaded();
      require('reflect-metadata');
      const { Test } = require('@nestjs/testing');
      const app = await Test.createTestingModule({ imports: [RateLimitModule.forRoot()] }).compile();
      await app.init();
      const d = await app.get(RateLimiterService).consume({ algorithm: 'gcra', limit: 1, window: '1s' }, 'k');
      await app.close();
      return { allowed: d.allowed, required, booted: loaded() };`);
    const none = { requested: [], cached: [] };
    expect(memoryApp).toEqual({ allowed: true, required: none, booted: none });
    // The same probe sees a client once one loads.
    const withRedis = clients(`require('ioredis'); return loaded();`);
    expect(withRedis).toEqual({ requested: ['ioredis'], cached: expect.arrayContaining([expect.stringContaining('ioredis')]) });
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
      const luaBytes = registry.all().every((a) => a.lua.includes('--@check'));
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

  test('dist/ ships no source maps: the JavaScript is what a stack trace shows, and it is in the package', () => {
    // Maps without their sources would point at lib/*.ts, which is not published; with them they doubled the package.
    expect(filesUnder(DIST, '.map')).toEqual([]);
    const referencing = filesUnder(DIST, '.js').filter((file) => readFileSync(join(DIST, file), 'utf8').includes('sourceMappingURL'));
    expect(referencing).toEqual([]);
  });

  test('the JavaScript carries no comments; the declarations, plain and dist/ts5.3, carry the documentation', () => {
    const commented = filesUnder(DIST, '.js').filter((file) => /^\s*(\/\*|\/\/)/m.test(readFileSync(join(DIST, file), 'utf8')));
    expect(commented).toEqual([]);
    for (const file of ['rate-limiter.service.d.ts', 'ts5.3/rate-limiter.service.d.ts', 'interfaces/module-options.interface.d.ts']) {
      expect(readFileSync(join(DIST, file), 'utf8')).toMatch(/^\s*\/\*\* /m);
    }
  });

  test('dist/ts5.3 holds the entry points and the declarations they reach that reach a package, each package import resolved as an ES module import; the rest exist once', () => {
    const plain = filesUnder(DIST, '.d.ts').filter((file) => !file.startsWith('ts5.3/'));
    const specifiers = (file: string) =>
      [...readFileSync(join(DIST, file), 'utf8').matchAll(/(?:\bfrom\s*|\bimport\(\s*)(['"])([^'"]+)\1/g)].map((match) => match[2]);
    const relativeSpecifiers = (file: string) => specifiers(file).filter((specifier) => specifier.startsWith('.'));
    /** The declaration (relative to dist/, with `/`) a relative specifier of `file` names. */
    const target = (file: string, specifier: string) => {
      const base = posix.join(posix.dirname(file), specifier).replace(/\.js$/, '');
      const found = [`${base}.d.ts`, posix.join(base, 'index.d.ts')].find((candidate) => existsSync(join(DIST, candidate)));
      if (!found) throw new Error(`${file}: '${specifier}' names no declaration`);
      return found;
    };
    // A declaration reaches a package if it imports one, or imports (relatively) one that does.
    const reaching = new Set(plain.filter((file) => specifiers(file).some((specifier) => !specifier.startsWith('.'))));
    for (let grew = true; grew;) {
      grew = false;
      for (const file of plain.filter((f) => !reaching.has(f))) {
        if (relativeSpecifiers(file).some((specifier) => reaching.has(target(file, specifier)))) {
          reaching.add(file);
          grew = true;
        }
      }
    }
    // TypeScript 5.3+ enters by the types@>=5.3 targets of "exports", and reads on through what they import.
    const { exports } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    const entries = Object.values(exports).flatMap((conditions) => {
      const entry = (conditions as Record<string, string | undefined>)['types@>=5.3'];
      return entry === undefined ? [] : [posix.relative('dist/ts5.3', posix.normalize(entry))];
    });
    expect(entries).toEqual([
      'index.d.ts',
      'testing/index.d.ts',
      'prometheus/index.d.ts',
      'terminus/index.d.ts',
      'event-emitter/index.d.ts',
      'opentelemetry/index.d.ts',
    ]);
    const expected = new Set<string>();
    for (let pending = [...entries], file = pending.pop(); file !== undefined; file = pending.pop()) {
      if (expected.has(file)) continue;
      expected.add(file);
      const from = file;
      pending.push(
        ...relativeSpecifiers(from)
          .map((specifier) => target(from, specifier))
          .filter((found) => reaching.has(found)),
      );
    }
    const copies = filesUnder(join(DIST, 'ts5.3'), '.d.ts');
    expect(copies).toEqual([...expected].sort());
    expect(copies).toContain('rate-limit.exception.d.ts');
    expect(plain.length - copies.length).toBeGreaterThan(0);

    const exception = readFileSync(join(DIST, 'ts5.3', 'rate-limit.exception.d.ts'), 'utf8');
    expect(exception).toContain("import type { HttpException } from '@nestjs/common' with { 'resolution-mode': 'import' };");
    const lines = copies.flatMap((file) => readFileSync(join(DIST, 'ts5.3', file), 'utf8').split('\n'));
    expect(
      lines.filter((line) => /^(import|export) .* from '[^.]/.test(line) && !line.endsWith("with { 'resolution-mode': 'import' };")),
    ).toEqual([]);
    expect(lines.filter((line) => /\bimport\(\s*['"][^.]/.test(line))).toEqual([]);
    // A copy imports other copies, or a plain declaration that reaches no package (so reads the same everywhere).
    const wrong = copies.flatMap((file) =>
      relativeSpecifiers(`ts5.3/${file}`)
        .map((specifier) => [file, specifier, target(`ts5.3/${file}`, specifier)])
        .filter(([, , found]) => !found.startsWith('ts5.3/') && reaching.has(found)),
    );
    expect(wrong).toEqual([]);
  });

  test('npm pack: at most 300 kB packed, holding dist/ (no maps, no build info), package.json, README.md and LICENSE', () => {
    // --ignore-scripts: beforeAll built dist/ already (prepack would build it again).
    const result = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8' });
    expect(result.status).toBe(0);
    const [packed] = JSON.parse(result.stdout) as Array<{ size: number; unpackedSize: number; files: Array<{ path: string }> }>;
    const paths = packed.files.map((file) => file.path);
    expect(paths.filter((path) => !path.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE'].includes(path))).toEqual([]);
    expect(paths.filter((path) => /\.(map|tsbuildinfo)$/.test(path))).toEqual([]);
    expect(paths).toEqual(
      expect.arrayContaining(['dist/index.js', 'dist/index.d.ts', 'dist/ts5.3/index.d.ts', 'dist/algorithms/decide.lua']),
    );
    expect(packed.size).toBeLessThanOrEqual(300_000);
  });
});
