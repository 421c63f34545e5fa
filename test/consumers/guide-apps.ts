/**
 * docs/testing.md › "Testing your app" followed as a user follows it, in a fresh app per Nest line and platform:
 * an app with only `@nestjs/platform-express` or only `@nestjs/platform-fastify` (and the packed library), the
 * guide's install line for its Nest major run as it is written (`npm install -D …`, which also installs the app's
 * own dependencies), the guide's jest.config.cjs, its app under test (`src/app.module.ts`) and its spec for that
 * platform (`test/cats.e2e-spec.ts`), each read from the guide at run time; then `jest --ci`, which must report
 * one test, passed. Run once per app, under the Node running the consumer test (jest's verdict on the guide does
 * not change with the Node major; the lines' cells cover those).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './exec';
import type { ConsumerLine } from './lines';

const ROOT = join(__dirname, '..', '..');
/** The guide followed; CONSUMER_TESTING_GUIDE tries another (a draft). */
const GUIDE = process.env.CONSUMER_TESTING_GUIDE ?? join(ROOT, 'docs', 'testing.md');

export type Platform = 'express' | 'fastify';
export const PLATFORMS: Platform[] = ['express', 'fastify'];

/** The lines whose apps follow the guide: one per supported Nest major. */
export const GUIDE_LINES = ['nest-10', 'nest-11', 'nest-12'];

/** The guide's fenced blocks of `lang` in the section that starts with `heading` (up to the next `## `). */
function blocks(guide: string, heading: string, lang: RegExp): string[] {
  const start = guide.search(new RegExp(`^${heading}$`, 'm'));
  if (start === -1) throw new Error(`${GUIDE} has no "${heading}" section`);
  const rest = guide.slice(start + 1);
  const end = rest.search(/^## /m);
  const section = end === -1 ? rest : rest.slice(0, end);
  return [...section.matchAll(/^```(\w+)\n([^]*?)^```$/gm)].filter(([, l]) => lang.test(l)).map(([, , source]) => source);
}

/** The one block whose first line is `// <first>` exactly (a file the guide names, and for what). */
function named(sources: string[], first: string): string {
  const found = sources.filter((source) => source.split('\n', 1)[0] === `// ${first}`);
  if (found.length !== 1) throw new Error(`${GUIDE}: expected exactly one block opening with "// ${first}", found ${found.length}`);
  return found[0];
}

/** What the guide gives an app on Nest `major` and `platform`: its install command and the files it says to write. */
export function guideFor(major: number, platform: Platform): { install: string[]; files: Record<string, string> } {
  const guide = readFileSync(GUIDE, 'utf8');
  const testing = '## Testing your app';
  const commands = blocks(guide, testing, /^(bash|sh|console)$/)
    .flatMap((source) => source.split('\n'))
    .filter((line) => line.startsWith('npm install ') && line.includes(`@nestjs/testing@^${major}`));
  if (commands.length !== 1)
    throw new Error(`${GUIDE}: expected one install line with @nestjs/testing@^${major}, found ${commands.length}`);
  const ts = blocks(guide, testing, /^ts$/);
  const label = platform === 'express' ? 'Express' : 'Fastify';
  return {
    install: commands[0].trim().split(/\s+/),
    files: {
      'jest.config.cjs': named(blocks(guide, testing, /^js$/), 'jest.config.cjs'),
      'src/app.module.ts': named(blocks(guide, '## The app under test', /^ts$/), 'src/app.module.ts'),
      'test/cats.e2e-spec.ts': named(ts, `test/cats.e2e-spec.ts (an app on ${label})`),
    },
  };
}

/** The Nest major of a line's version range (`^11.0.0` → 11). */
export function nestMajor(line: ConsumerLine): number {
  return Number(/\d+/.exec(line.nest)![0]);
}

/**
 * An app on `line`'s Nest and `platform` alone in `dir`, set up and tested as the guide says; the failures (none
 * when jest reports 1 test passed). Throws when the app cannot be installed.
 */
export async function guideFailures(line: ConsumerLine, platform: Platform, tarball: string, dir: string): Promise<string[]> {
  const { install, files } = guideFor(nestMajor(line), platform);
  mkdirSync(join(dir, 'src'), { recursive: true });
  mkdirSync(join(dir, 'test'), { recursive: true });
  const pkg = {
    name: `guide-${line.name}-${platform}`,
    private: true,
    dependencies: {
      '@nestjs/common': line.nest,
      '@nestjs/core': line.nest,
      [`@nestjs/platform-${platform}`]: line.nest,
      'nestjs-redis-ratelimit': `file:${tarball}`,
      'reflect-metadata': line.reflectMetadata,
      rxjs: '^7.8.0',
    },
    devDependencies: { '@types/node': '^20.0.0', typescript: line.typescript },
  };
  writeFileSync(join(dir, 'package.json'), JSON.stringify(pkg, null, 2));
  const compilerOptions = {
    module: 'commonjs',
    target: 'es2021',
    strict: true,
    esModuleInterop: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    skipLibCheck: true,
  };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions }, null, 2));
  for (const [file, source] of Object.entries(files)) writeFileSync(join(dir, file), source);
  const [npm, ...args] = install;
  await run(npm, [...args, '--no-audit', '--no-fund'], dir);
  const other = platform === 'express' ? 'fastify' : 'express';
  const failures: string[] = [];
  const present = await run(process.execPath, ['-e', `require.resolve('@nestjs/platform-${other}')`], dir).then(
    () => true,
    () => false,
  );
  if (present) failures.push(`@nestjs/platform-${other} is installed: the app is not ${platform}-only`);
  const output = await run(process.execPath, [join(dir, 'node_modules', 'jest', 'bin', 'jest.js'), '--ci'], dir, {
    ...process.env,
    NO_COLOR: '1',
    FORCE_COLOR: '0',
  }).catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
  if (!/^Tests:\s+1 passed, 1 total$/m.test(output)) failures.push(`expected 1 test, passed; jest said:\n${output}`);
  return failures;
}
