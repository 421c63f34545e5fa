/**
 * The Node.js binaries the consumer apps run on. The running Node serves its own major; any other comes from the
 * npm registry, where `node-<platform>-<arch>@<major>` is the official binary of that major's newest release
 * (`bin/node` of the package), installed once into a cache kept across runs and refreshed weekly.
 *
 * CONSUMER_NODES=20,24 picks the majors (default: every one in NODE_MAJORS); CONSUMER_NODE_CACHE moves the cache
 * (default ~/.cache/nestjs-redis-ratelimit/node).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { run } from './exec';

/** The Node majors every consumer app boots on: the floor of package.json "engines" (20.19) and the later LTS lines. */
export const NODE_MAJORS = [20, 22, 24];

export interface NodeBinary {
  major: number;
  /** `process.version` of the binary, such as `v22.23.3`. */
  version: string;
  path: string;
}

const CACHE = process.env.CONSUMER_NODE_CACHE ?? join(homedir(), '.cache', 'nestjs-redis-ratelimit', 'node');
/** A cached binary installed longer ago than this is installed again, so each major runs its latest release. */
const REFRESH_MS = 7 * 24 * 3600 * 1000;

/** The binary of one Node major: the running one, or the cached (else freshly installed) registry package. */
export async function nodeBinary(major: number): Promise<NodeBinary> {
  if (process.versions.node.split('.')[0] === String(major)) return { major, version: process.version, path: process.execPath };
  const pkg = `node-${process.platform}-${process.arch}`;
  const dir = join(CACHE, String(major));
  const path = join(dir, 'node_modules', pkg, 'bin', 'node');
  // npm extracts every file with the same fixed mtime, so the install records its own time.
  const stamp = join(dir, 'installed-at');
  const installedAt = existsSync(stamp) ? Number(readFileSync(stamp, 'utf8')) : 0;
  if (!existsSync(path) || !(Date.now() - installedAt < REFRESH_MS)) {
    mkdirSync(dir, { recursive: true });
    const args = ['install', '--prefix', dir, '--no-save', '--no-package-lock', '--no-audit', '--no-fund', `${pkg}@${major}`];
    try {
      await run('npm', args, dir);
      writeFileSync(stamp, String(Date.now()));
    } catch (error) {
      // A refresh that fails (registry away) keeps the cached binary; a first install has nothing to fall back on.
      if (!existsSync(path)) throw error;
      console.log(
        `Node ${major}: could not refresh ${pkg}, using the cached one (${error instanceof Error ? error.message : String(error)})`,
      );
    }
  }
  const version = (await run(path, ['--version'], dir)).trim();
  if (!version.startsWith(`v${major}.`)) throw new Error(`${path} is ${version}, expected Node ${major}`);
  return { major, version, path };
}

/** The binaries of the majors CONSUMER_NODES asks for (all of NODE_MAJORS by default), installed concurrently. */
export function nodeBinaries(): Promise<NodeBinary[]> {
  const majors = process.env.CONSUMER_NODES ? process.env.CONSUMER_NODES.split(',').map(Number) : NODE_MAJORS;
  return Promise.all(majors.map((major) => nodeBinary(major)));
}
