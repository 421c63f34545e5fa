/**
 * docs/testing.md › "Testing your app" run in a consumer app by the test runners its line names: jest with the jest
 * config the guide shows, read from docs/testing.md at run time so the check follows the README, and vitest with no
 * configuration of its own. Both run fixture/rate-limit.scenario.ts through their own spec file.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { run } from './exec';
import type { ConsumerLine } from './lines';

const ROOT = join(__dirname, '..', '..');
/** The README whose jest config is tested; CONSUMER_README tries another (a draft of a README change). */
const README = process.env.CONSUMER_README ?? join(ROOT, 'docs', 'testing.md');
/**
 * vitest 5 needs Node 22.12 or later; 4 is the newest that runs on Node 20. Vite 8 compiles decorator metadata
 * as tsconfig.json asks; Vite 7 (esbuild, which vitest 4 also accepts) leaves it out and Nest cannot inject by type.
 */
const VITEST = { vitest: '4.1.12', vite: '8.3.8' };

type Runner = NonNullable<ConsumerLine['testRunners']>[number];

/** What each runner needs in the app: jest, SWC and supertest at the versions this repo's own tests run. */
export function runnerDevDependencies(runners: Runner[]): Record<string, string> {
  const ours = (name: string) =>
    (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  const needs: Record<Runner, string[]> = { jest: ['jest', '@swc/core', '@swc/jest', 'supertest'], vitest: ['supertest'] };
  const deps: Record<string, string> = Object.fromEntries(runners.flatMap((runner) => needs[runner]).map((name) => [name, ours(name)]));
  return runners.includes('vitest') ? { ...deps, ...VITEST } : deps;
}

/**
 * The jest config of README › "Testing your app": the one fenced `js` block of that section (up to the next `## `
 * heading) whose first line is a comment naming the file, such as `// jest.config.cjs`. The file name is the
 * README's too: what the app gets is what a user pastes.
 */
export function readmeJestConfig(readme: string): { file: string; source: string } {
  const start = readme.search(/^## Testing your app$/m);
  if (start === -1) throw new Error(`${README} has no "## Testing your app" section`);
  const rest = readme.slice(start + 1);
  const end = rest.search(/^## /m);
  const section = end === -1 ? rest : rest.slice(0, end);
  const blocks = [...section.matchAll(/^```(?:js|javascript)\n([^]*?)^```$/gm)].map(([, source]) => source);
  const configs = blocks.flatMap((source) => {
    const named = /^\/\/ (jest\.config\.(?:js|cjs|mjs))\b/.exec(source);
    return named ? [{ file: named[1], source }] : [];
  });
  if (configs.length !== 1) {
    throw new Error(
      `README › Testing your app: expected exactly one \`\`\`js block opening with "// jest.config.<js|cjs|mjs>", found ${configs.length}`,
    );
  }
  return configs[0];
}

/** The runner's spec in `dir`, run by the Node binary `node` (with `env`): one test, passed; else the runner's output. */
export async function runTests(
  runner: Runner,
  dir: string,
  node = process.execPath,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string[]> {
  const bin = join(dir, 'node_modules', runner, ...(runner === 'jest' ? ['bin', 'jest.js'] : ['vitest.mjs']));
  if (runner === 'jest') {
    const { file, source } = readmeJestConfig(readFileSync(README, 'utf8'));
    writeFileSync(join(dir, file), source);
  }
  const args = runner === 'jest' ? [bin, '--ci', 'rate-limit.jest'] : [bin, 'run', 'rate-limit.vitest'];
  const output = await run(node, args, dir, { ...env, NO_COLOR: '1', FORCE_COLOR: '0' });
  const passed = runner === 'jest' ? /^Tests:\s+1 passed, 1 total$/m : /^\s*Tests\s+1 passed \(1\)$/m;
  return passed.test(output) ? [] : [`expected 1 test, passed; ${runner} said:\n${output}`];
}
