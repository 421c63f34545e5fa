/**
 * docs/scripts/ holds every script the Redis store sends, as Redis receives it (scripts/assemble-scripts.ts):
 * each file equals what the store composes now, and no file is left over from a script it no longer sends.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { assembledScripts } from '../../lib/stores/redis/redis-scripts';

const DIR = join(__dirname, '..', '..', 'docs', 'scripts');
const scripts = assembledScripts(new RateLimitAlgorithmRegistry().all());

test('one file per script: one-policy and decide per algorithm, decide with all of them, and across slots', () => {
  expect([...scripts.keys()].length).toBe(16);
  expect(
    readdirSync(DIR)
      .filter((f) => f.endsWith('.lua'))
      .sort(),
  ).toEqual([...scripts.keys()].sort());
});

test.each([...scripts.keys()])('docs/scripts/%s is up to date (npm run assemble-scripts)', (name) => {
  expect(readFileSync(join(DIR, name), 'utf8')).toBe(scripts.get(name));
});
