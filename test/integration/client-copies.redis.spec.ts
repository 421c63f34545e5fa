/**
 * A client created by a second installed copy of its library (another version, or one nested under some package),
 * against a real redis-server: the store works with it as with the copy this library resolves (scripts load,
 * `NOSCRIPT` after `SCRIPT FLUSH` recovers, counts are exact, nothing falls back), and where the client's copy
 * cannot be reached (loaded outside the module registry, as in a bundle) bootstrap fails with an error saying
 * that two copies are installed and how to keep one.
 *
 * The second copy is a real one: the package's files copied into a temporary node_modules (GLIDE's native addon
 * too: at another path it is another library, with its own native state), every other package linked to ours.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type * as Glide from '@valkey/valkey-glide';
import type * as Ioredis from 'ioredis';
import { Redis } from 'ioredis';
import type * as NodeRedis from 'redis';
import { RateLimitModule } from '../../lib';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import type { RedisClient } from '../../lib/interfaces/client-types';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const NODE_MODULES = join(__dirname, '..', '..', 'node_modules');
const registry = new RateLimitAlgorithmRegistry();
const five: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: '1h', name: 'five' };

/**
 * A temporary node_modules holding a copy of `packages` (names, or scopes' entries such as `@redis/client`) and a
 * link to every other package of ours; returns its path.
 */
function secondCopy(dirs: string[], packages: readonly string[]): string {
  const root = mkdtempSync(join(tmpdir(), 'rl-copies-'));
  dirs.push(root);
  const modules = join(root, 'node_modules');
  mkdirSync(modules);
  for (const entry of readdirSync(NODE_MODULES)) {
    if (entry.startsWith('.')) continue;
    if (!entry.startsWith('@')) {
      if (packages.includes(entry)) cpSync(join(NODE_MODULES, entry), join(modules, entry), { recursive: true });
      else symlinkSync(join(NODE_MODULES, entry), join(modules, entry));
      continue;
    }
    mkdirSync(join(modules, entry));
    for (const scoped of readdirSync(join(NODE_MODULES, entry))) {
      const name = `${entry}/${scoped}`;
      if (packages.includes(name)) cpSync(join(NODE_MODULES, name), join(modules, name), { recursive: true });
      else symlinkSync(join(NODE_MODULES, name), join(modules, name));
    }
  }
  return modules;
}

/** GLIDE and its native addon for this platform. */
const GLIDE_PACKAGES = [
  '@valkey/valkey-glide',
  ...readdirSync(join(NODE_MODULES, '@valkey'))
    .filter((name) => name.startsWith('valkey-glide-'))
    .map((name) => `@valkey/${name}`),
];
const NODE_REDIS_PACKAGES = ['redis', ...readdirSync(join(NODE_MODULES, '@redis')).map((name) => `@redis/${name}`)];

let redis: RedisProcess;
let admin: Redis;
const dirs: string[] = [];
const closers: Array<() => unknown> = [];

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
});

afterEach(async () => {
  jest.restoreAllMocks();
  for (const close of closers.splice(0)) await close();
});

/** Seven decisions, `SCRIPT FLUSH` before each, then ten in one tick after a flush: as the module's service decides them. */
async function decideThrough(client: RedisClient, prefix: string): Promise<string[]> {
  const { svc, store } = serviceOver(
    { redis: client, prefix, storeTimeoutMs: 5_000, onStoreError: 'fail-closed', hotKeyShedding: false },
    registry,
  );
  closers.unshift(() => store.close());
  const seen: string[] = [];
  for (let i = 0; i < 7; i++) {
    await admin.script('FLUSH');
    const d = await svc.consume(five, 'lone');
    seen.push(`${d.allowed ? 'allowed' : 'rejected'} ${d.remaining}${d.reason ? ` ${d.reason}` : ''}`);
  }
  await admin.script('FLUSH');
  const batch = await Promise.all(Array.from({ length: 10 }, () => svc.consume(five, 'batch')));
  seen.push(`batch: ${batch.filter((d) => d.allowed).length} allowed, reasons ${JSON.stringify(batch.flatMap((d) => d.reason ?? []))}`);
  return seen;
}

const EXACT = ['allowed 4', 'allowed 3', 'allowed 2', 'allowed 1', 'allowed 0', 'rejected 0', 'rejected 0', 'batch: 5 allowed, reasons []'];

describe('a client from a second copy of its library', () => {
  it('Valkey GLIDE: scripts are created by the client’s own copy, so they load and counts are exact', async () => {
    const modules = secondCopy(dirs, GLIDE_PACKAGES);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const other = require(join(modules, '@valkey/valkey-glide')) as typeof Glide;
    const ours = jest.requireActual<typeof Glide>('@valkey/valkey-glide');
    expect(other.Script).not.toBe(ours.Script);
    other.Logger.setLoggerConfig('error');
    const client = await other.GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: redis.port }], requestTimeout: 5_000 });
    closers.push(() => client.close());
    // What went wrong before: a Script of our copy is unknown to the client's, which cannot load it on NOSCRIPT.
    await expect(client.invokeScript(new ours.Script('return 1'), { keys: [], args: [] })).rejects.toThrow(/NoScript/i);
    expect(await decideThrough(client, 'copies-glide')).toEqual(EXACT);
  });

  it('ioredis: commands are built by the client’s own copy; counts are exact', async () => {
    const modules = secondCopy(dirs, ['ioredis']);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const other = require(join(modules, 'ioredis')) as typeof Ioredis;
    expect(other.Command).not.toBe(jest.requireActual<typeof Ioredis>('ioredis').Command);
    const client = new other.Redis(redis.url, { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true });
    await client.connect();
    closers.push(() => client.disconnect());
    const scriptCalls = (Command: typeof Ioredis.Command) => {
      const spy = jest.spyOn(Command.prototype, 'toWritable');
      return () => spy.mock.contexts.filter((command) => command.name === 'evalsha' || command.name === 'eval').length;
    };
    const [theirs, ours] = [scriptCalls(other.Command), scriptCalls(jest.requireActual<typeof Ioredis>('ioredis').Command)];
    expect(await decideThrough(client, 'copies-ioredis')).toEqual(EXACT);
    // The batch went out as a Command of the client's copy (written straight to its connection).
    expect([theirs() > 0, ours()]).toEqual([true, 0]);
  });

  it('node-redis: the transport takes nothing but the client’s own methods; counts are exact', async () => {
    const modules = secondCopy(dirs, NODE_REDIS_PACKAGES);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const other = require(join(modules, 'redis')) as typeof NodeRedis;
    expect(other.createClient).not.toBe(jest.requireActual<typeof NodeRedis>('redis').createClient);
    const client = other.createClient({ url: redis.url, disableOfflineQueue: true });
    client.on('error', () => undefined);
    await client.connect();
    closers.push(() => client.destroy());
    expect(await decideThrough(client as unknown as RedisClient, 'copies-node-redis')).toEqual(EXACT);
  });

  describe('whose copy cannot be reached (not among the loaded modules, as in a bundle)', () => {
    /** `path` loaded in an isolated registry, which is dropped afterwards: the modules are no longer listed. */
    const loadHidden = <T>(path: string): T => {
      let loaded: T | undefined;
      jest.isolateModules(() => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        loaded = require(path) as T;
      });
      return loaded!;
    };

    it.each([
      ['Valkey GLIDE', GLIDE_PACKAGES, '@valkey/valkey-glide'],
      ['ioredis', ['ioredis'], 'ioredis'],
    ] as const)('%s: bootstrap fails, saying two copies are installed and how to keep one', async (label, packages, name) => {
      const modules = secondCopy(dirs, packages);
      let client: RedisClient;
      if (name === 'ioredis') {
        const { Redis: Other } = loadHidden<typeof Ioredis>(join(modules, 'ioredis'));
        const c = new Other(redis.url, { lazyConnect: true });
        closers.push(() => c.disconnect());
        client = c;
      } else {
        const other = loadHidden<typeof Glide>(join(modules, '@valkey/valkey-glide'));
        other.Logger.setLoggerConfig('error');
        const c = await other.GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port: redis.port }] });
        closers.push(() => c.close());
        client = c;
      }
      const error = await Test.createTestingModule({ imports: [RateLimitModule.forRoot({ redis: client })] })
        .compile()
        .then(
          async (moduleRef) => void (await moduleRef.close()),
          (e: unknown) => e as Error,
        );
      expect(error).toBeInstanceOf(RateLimitConfigError);
      expect(error?.message).toBe(
        `redis: the ${label} client passed in comes from another copy of ${name} than the one this library loads ` +
          `(${require.resolve(name)}), and that copy is not among the loaded modules, so its classes cannot be used: ` +
          `two copies of ${name} are installed. Keep one: \`npm ls ${name}\` lists them; \`npm dedupe\`, or one version ` +
          `pinned in package.json "overrides" (yarn/pnpm: "resolutions" / "pnpm.overrides"), merges them.`,
      );
    });
  });
});
