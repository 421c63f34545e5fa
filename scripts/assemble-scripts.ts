/**
 * Writes every script the Redis store sends, as Redis receives it, to docs/scripts/ (`npm run assemble-scripts`):
 * the scripts are composed from the fragments in lib/algorithms/ at load time, so these files are where a
 * reviewer reads what runs. test/unit/assembled-scripts.spec.ts fails when one is out of date.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { assembledScripts } from '../lib/stores/redis/redis-scripts';
import { RateLimitAlgorithmRegistry } from '../lib/algorithms/algorithm.registry';

const ASSEMBLED_DIR = join(__dirname, '..', 'docs', 'scripts');

if (require.main === module) {
  mkdirSync(ASSEMBLED_DIR, { recursive: true });
  for (const file of readdirSync(ASSEMBLED_DIR)) if (file.endsWith('.lua')) rmSync(join(ASSEMBLED_DIR, file));
  const scripts = assembledScripts(new RateLimitAlgorithmRegistry().all());
  for (const [name, lua] of scripts) writeFileSync(join(ASSEMBLED_DIR, name), lua);
  console.log(`wrote ${scripts.size} scripts to docs/scripts/`);
}
