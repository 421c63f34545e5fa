import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ConsumerLine, TypeCheck } from './lines';
import { runnerDevDependencies } from './test-runners';

const FIXTURE = join(__dirname, 'fixture');

const TYPE_CHECK_OPTIONS: Record<TypeCheck['resolution'], object> = {
  node10: { module: 'commonjs', moduleResolution: 'node', target: 'es2021' },
  node16: { module: 'node16', moduleResolution: 'node16', target: 'es2022' },
  nodenext: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022' },
  bundler: { module: 'esnext', moduleResolution: 'bundler', target: 'es2022' },
};

/**
 * A fresh app in `dir` for `line`, laid out as `nest new` lays one out: package.json, a tsconfig.json covering
 * every file (what editors and vitest read), a tsconfig.build.json compiling the app alone, and one tsconfig per
 * declaration check.
 */
export function writeApp(dir: string, line: ConsumerLine, tarball: string): void {
  cpSync(FIXTURE, dir, { recursive: true });
  if (line.optionalPeers) cpSync(join(FIXTURE, 'extras-peers.ts'), join(dir, 'extras.ts'));
  const nest = line.nest;
  const pkg = {
    name: `consumer-${line.name.replace(/\W/g, '-')}`,
    private: true,
    ...(line.esm ? { type: 'module' } : {}),
    dependencies: {
      '@nestjs/common': nest,
      '@nestjs/core': nest,
      '@nestjs/platform-express': nest,
      '@nestjs/platform-fastify': nest,
      '@nestjs/terminus': line.terminus,
      '@opentelemetry/api': line.opentelemetry,
      ...(line.optionalPeers
        ? { '@nestjs/event-emitter': line.optionalPeers.eventEmitter, 'prom-client': line.optionalPeers.promClient }
        : {}),
      ioredis: line.ioredis,
      'nestjs-redis-ratelimit': `file:${tarball}`,
      'reflect-metadata': line.reflectMetadata,
      rxjs: '^7.8.0',
    },
    devDependencies: {
      '@nestjs/testing': nest,
      '@types/express': line.typesExpress,
      '@types/node': '^20.0.0',
      typescript: line.typescript,
      ...runnerDevDependencies(line.testRunners ?? []),
    },
  };
  writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
  const base = {
    strict: line.strict,
    esModuleInterop: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    skipLibCheck: false,
    types: ['node'],
  };
  const compilerOptions = { ...base, ...line.compilerOptions, outDir: 'dist', rootDir: '.' };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, exclude: ['node_modules', 'dist'] }, null, 2));
  writeFileSync(join(dir, 'tsconfig.build.json'), JSON.stringify({ extends: './tsconfig.json', files: ['main.ts'], include: [] }, null, 2));
  for (const check of line.typeChecks) {
    const file = check.esmFile ? 'types.mts' : 'types.ts';
    if (check.esmFile) cpSync(join(FIXTURE, 'types.ts'), join(dir, file));
    // A line's optional-peer modules are checked under every resolution too (extras.ts imports their entry points).
    const files = line.optionalPeers ? [file, 'extras.ts'] : [file];
    const config = { compilerOptions: { ...base, ...TYPE_CHECK_OPTIONS[check.resolution], noEmit: true }, files };
    writeFileSync(join(dir, `tsconfig.${check.resolution}.json`), JSON.stringify(config, null, 2));
  }
}
