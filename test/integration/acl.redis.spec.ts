/**
 * The README's Redis ACL (docs/redis-clients-and-servers.md › Security and deployment), read from that file when the test runs, against
 * real servers. A user with exactly those grants runs everything the library sends — every algorithm through
 * consume, peek, penalty, refund, reserve/settle, leases (`extend` included), lockouts (escalating too),
 * calendar windows, multi-policy and batched decisions, the deny list, runtime overrides (set with and without
 * an end, an ended one dropped, listed, removed), `NOSCRIPT` recovery, the wrong-type
 * explanation (`TYPE`) and the health check's `PING` — with ioredis, node-redis and Valkey GLIDE, on a
 * standalone server and a 3-master Cluster, and (ioredis) through Sentinel. `ACL LOG` stays empty: no command
 * was denied, not even one a client would have ignored. The line grants nothing more than that.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import { RATE_LIMIT_ALGORITHMS, type RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import type { RedisClient } from '../../lib/interfaces/client-types';
import { REDIS_CLIENTS, type RedisClientKind, type RedisClientName } from '../support/redis-clients';
import { libraryCluster, startRedis, startRedisCluster, startRedisSentinel } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const README = join(__dirname, '..', '..', 'docs', 'redis-clients-and-servers.md');
/** Where the scripts are: the decision scripts' fragments, and the store's own (the runtime overrides'). */
const SCRIPT_DIRS = [join(__dirname, '..', '..', 'lib', 'algorithms'), join(__dirname, '..', '..', 'lib', 'stores', 'redis')];
const USER = { username: 'ratelimit', password: 'secret' };
const registry = new RateLimitAlgorithmRegistry();

/**
 * What the library's Node code sends besides its scripts: `EVALSHA`, `EVAL` (ioredis and node-redis after
 * `NOSCRIPT`), `SCRIPT LOAD` (GLIDE after `NOSCRIPT`), `DEL` (reset, unblock, allow), `TYPE` (naming a key of
 * the wrong type), `PING` (health check); and what the clients send: `INFO` (ioredis's ready check and Sentinel
 * role check), `CLUSTER SLOTS` (every cluster client's slot map), `CLUSTER INFO` (ioredis's cluster ready
 * check) and `CLIENT SETNAME` (ioredis names its cluster slot-refresh connection).
 */
const NODE_COMMANDS = [
  'evalsha',
  'eval',
  'script|load',
  'fcall',
  'function|load',
  'del',
  'type',
  'ping',
  'info',
  'cluster|slots',
  'cluster|info',
  'client|setname',
];

/** The README's `ACL SETUSER ratelimit on >secret <rules>` line: its rules. */
function readmeRules(): string[] {
  const line = /`ACL SETUSER ratelimit on >secret ([^`]+)`/.exec(readFileSync(README, 'utf8'));
  if (!line) throw new Error(`no \`ACL SETUSER ratelimit on >secret …\` line in ${README}`);
  return line[1].trim().split(/\s+/);
}

/** Every command the Lua scripts call (`redis.call` / `redis.pcall`), lowercase. */
function scriptCommands(): string[] {
  const found = new Set<string>();
  for (const dir of SCRIPT_DIRS) {
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) {
      for (const [, name] of readFileSync(join(dir, file), 'utf8').matchAll(/redis\.p?call\(\s*['"]([A-Za-z]+)['"]/g))
        found.add(name.toLowerCase());
    }
  }
  return [...found];
}

const servers: Array<{ stop(hard?: boolean): Promise<void> }> = [];
const closers: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const close of closers.reverse()) await Promise.resolve(close()).catch(() => undefined);
  for (const server of servers) await server.stop(true);
});

/** Creates the `ratelimit` user with `rules` on a server, and clears its ACL log. */
async function addUser(port: number, rules: string[]): Promise<void> {
  const admin = new Redis({ port, maxRetriesPerRequest: 1 });
  try {
    await admin.call('ACL', 'SETUSER', 'ratelimit', 'reset', 'on', `>${USER.password}`, ...rules);
    await admin.call('ACL', 'LOG', 'RESET');
  } finally {
    admin.disconnect();
  }
}

/** A server's `ACL LOG`, one line per entry: what was denied, and where. */
async function deniedOn(port: number): Promise<string[]> {
  const admin = new Redis({ port, maxRetriesPerRequest: 1 });
  try {
    const entries = (await admin.call('ACL', 'LOG')) as unknown[][];
    return entries.map((entry) => {
      const fields = new Map(entry.flatMap((v, i) => (i % 2 === 0 ? [[String(v), String(entry[i + 1])]] : [])));
      return `${fields.get('reason')} ${fields.get('object')} (${fields.get('context')}) on ${port}`;
    });
  } finally {
    admin.disconnect();
  }
}

/** `SCRIPT FLUSH` on every server: the next call of each script meets `NOSCRIPT`. */
async function flushScripts(ports: number[]): Promise<void> {
  for (const port of ports) {
    const admin = new Redis({ port, maxRetriesPerRequest: 1 });
    await admin.script('FLUSH').finally(() => admin.disconnect());
  }
}

/** A service on a store built as the module builds it: fail-closed and no shedding, so every answer is Redis's. */
async function service(redis: RateLimitModuleOptions['redis']): Promise<{ svc: RateLimiterService; store: RateLimitStore }> {
  const options: RateLimitModuleOptions = { redis, onStoreError: 'fail-closed', hotKeyShedding: false, storeTimeoutMs: 2_000 };
  const { svc, store } = serviceOver(options, registry);
  closers.push(() => store.close());
  expect(await store.ready?.(5_000)).toBe(true);
  return { svc, store };
}

const outcome = (d: { allowed: boolean; reason?: string }) => `${d.allowed ? 'allowed' : 'rejected'}${d.reason ? ` ${d.reason}` : ''}`;

/** Every algorithm through every service call, with `NOSCRIPT` in the middle; the outcomes are exact. */
async function everything(svc: RateLimiterService, flush: () => Promise<void>, store: RateLimitStore): Promise<void> {
  for (const algorithm of RATE_LIMIT_ALGORITHMS) {
    const policy: RateLimitPolicy = { algorithm, limit: 2, window: '1h', name: `acl-${algorithm}` };
    const seen: string[] = [outcome(await svc.consume(policy, 'u')), outcome(await svc.peek(policy, 'u'))];
    if (algorithm === 'concurrency') {
      const lease = await svc.lease(policy, 'u');
      seen.push(outcome(lease.decision), `extended ${await lease.extend()}`);
      await lease.release();
    } else {
      seen.push(outcome(await svc.penalty(policy, 'u', 1)));
      await svc.refund(policy, 'u', 1);
      const reservation = await svc.reserve(policy, 'u', { cost: 1 });
      seen.push(outcome(reservation.decision));
      await reservation.settle(0);
    }
    await flush();
    seen.push(outcome(await svc.consume(policy, 'u')), outcome(await svc.consume(policy, 'u')));
    await svc.block(policy, 'u', '1h');
    seen.push(outcome(await svc.consume(policy, 'u')));
    await svc.unblock(policy, 'u');
    await svc.reset(policy, 'u');
    seen.push(...(await Promise.all([1, 2, 3].map(() => svc.consume(policy, 'u')))).map(outcome));
    // A lease, then its renewal; or a penalty (answering as a one-unit peek: full), then a reservation after a refund.
    const middle = algorithm === 'concurrency' ? ['allowed', 'extended true'] : ['rejected', 'allowed'];
    expect({ algorithm, seen }).toEqual({
      algorithm,
      seen: ['allowed', 'allowed', ...middle, 'allowed', 'rejected', 'rejected blocked', 'allowed', 'allowed', 'rejected'],
    });
  }
  const escalating: RateLimitPolicy = {
    algorithm: 'fixed-window',
    limit: 1,
    window: '1h',
    name: 'acl-escalate',
    blockFor: '1m',
    escalate: { max: '1h', forgiveAfter: '1h' },
  };
  const calendar: RateLimitPolicy = {
    algorithm: 'fixed-window',
    limit: 1,
    window: { calendar: 'day', timeZone: 'Europe/Paris' },
    name: 'acl-day',
  };
  const both = await svc.consumeAll(
    [
      { algorithm: 'sliding-log', limit: 1, window: '1h', name: 'acl-a' },
      { algorithm: 'token-bucket', limit: 1, window: '1h', name: 'acl-b' },
    ],
    'm',
  );
  await svc.deny('ip:203.0.113.7', '1h', 'stuffing');
  const denial = await svc.denied('ip:203.0.113.7');
  const whileDenied = await svc.consume(calendar, 'ip:203.0.113.7');
  await svc.allow('ip:203.0.113.7');
  expect({
    escalating: [await svc.consume(escalating, 'e'), await svc.consume(escalating, 'e'), await svc.consume(escalating, 'e')].map(outcome),
    calendar: [await svc.consume(calendar, 'c'), await svc.consume(calendar, 'c')].map(outcome),
    both: both.allowed,
    denial: denial?.reason,
    whileDenied: outcome(whileDenied),
    afterAllow: [await svc.denied('ip:203.0.113.7'), outcome(await svc.consume(calendar, 'ip:203.0.113.7'))],
  }).toEqual({
    escalating: ['allowed', 'rejected blocked', 'rejected blocked'],
    calendar: ['allowed', 'rejected'],
    both: true,
    denial: 'stuffing',
    whileDenied: 'rejected blocked',
    afterAllow: [undefined, 'allowed'],
  });
  await expect(store.ping!()).resolves.toBeUndefined();
  await overrides(svc);
}

/**
 * Runtime overrides through both of their scripts, down every branch that calls Redis: set without an end and
 * with one, an ended one dropped by the next write, a read of the whole set, the override applied, removals.
 */
async function overrides(svc: RateLimiterService): Promise<void> {
  const named: RateLimitPolicy = { algorithm: 'fixed-window', limit: 1, window: '1h', name: 'acl-override' };
  expect(outcome(await svc.consume(named, 'o-0'))).toBe('allowed');
  await svc.setOverride('acl-override', 'o-*', { limit: 2 });
  const ends = Date.now() + 1_000;
  await svc.setOverride('acl-override', 'o-brief', { limit: 3 }, { until: ends });
  await new Promise((resolve) => setTimeout(resolve, ends + 100 - Date.now()));
  await svc.setOverride('acl-override', 'o-1', { limit: 3 });
  const listed = (await svc.listOverrides('acl-override')).map((o) => `${o.tracker}=${o.override.limit}`);
  const applied = [];
  for (let i = 0; i < 3; i++) applied.push(outcome(await svc.consume(named, 'o-2')));
  await svc.removeOverride('acl-override', 'o-*');
  await svc.removeOverride('acl-override', 'o-1');
  expect({ listed, applied, after: await svc.listOverrides() }).toEqual({
    listed: ['o-*=2', 'o-1=3'],
    applied: ['allowed', 'allowed', 'rejected'],
    after: [],
  });
}

/** A key of someone else's type under ours: the error names it, which takes `TYPE` (a store without fallback, so the error shows). */
async function wrongType(client: RedisClient, port: number): Promise<void> {
  const store = new RedisStore(client, registry.all(), false);
  const svc = new RateLimiterService(new RateLimitEngine(store), registry, {});
  const policy: RateLimitPolicy = { algorithm: 'gcra', limit: 1, window: '1h', name: 'acl-foreign' };
  await svc.consume(policy, 'foreign');
  const admin = new Redis({ port, maxRetriesPerRequest: 1 });
  try {
    const [key] = await admin.keys('rl:{by%3Aforeign}:*');
    await admin.del(key);
    await admin.rpush(key, 'not ours');
    await expect(svc.consume(policy, 'foreign')).rejects.toThrow(`Redis key "${key}" holds a list, but`);
  } finally {
    admin.disconnect();
  }
}

/** What ioredis prints with console.warn while `work` runs (its ready check when INFO is denied), and the library's warnings. */
async function warnings(work: () => Promise<void>): Promise<string[]> {
  const seen: string[] = [];
  const consoleWarn = jest.spyOn(console, 'warn').mockImplementation((...args: unknown[]) => void seen.push(args.map(String).join(' ')));
  const loggerWarn = jest.spyOn(Logger.prototype, 'warn').mockImplementation((message: unknown) => void seen.push(String(message)));
  try {
    await work();
  } finally {
    consoleWarn.mockRestore();
    loggerWarn.mockRestore();
  }
  return seen;
}

/** A client of `kind` logged in as the `ratelimit` user: standalone, or a cluster client. */
async function connectAsUser(kind: RedisClientName, ports: number[], cluster: boolean): Promise<RedisClient> {
  const nodes = ports.map((port) => ({ host: '127.0.0.1', port }));
  if (kind === 'ioredis' && cluster) return libraryCluster(nodes, { redisOptions: USER });
  if (kind === 'ioredis') return new Redis({ port: ports[0], ...USER, maxRetriesPerRequest: 0 });
  if (kind === 'node-redis') {
    const { createClient, createCluster } = await import('redis');
    const url = (port: number) => `redis://${USER.username}:${USER.password}@127.0.0.1:${port}`;
    const client = cluster
      ? createCluster({ rootNodes: ports.map((port) => ({ url: url(port) })), defaults: { ...USER, disableOfflineQueue: true } })
      : createClient({ url: url(ports[0]), disableOfflineQueue: true });
    client.on('error', () => undefined);
    return (await client.connect()) as unknown as RedisClient;
  }
  const glide = await import('@valkey/valkey-glide');
  glide.Logger.setLoggerConfig('error');
  const options = { addresses: nodes, credentials: USER, requestTimeout: 5_000 };
  return cluster ? glide.GlideClusterClient.createClient(options) : glide.GlideClient.createClient(options);
}

const kindOf = (name: RedisClientName): RedisClientKind => REDIS_CLIENTS.find((k) => k.name === name)!;

describe('the README ACL', () => {
  it('grants every command the scripts call and the library and its clients send, and nothing more, on the library’s keys', () => {
    const rules = readmeRules();
    expect(rules.filter((r) => r.startsWith('~'))).toEqual(['~rl:*']);
    const granted = rules.filter((r) => r.startsWith('+')).map((r) => r.slice(1));
    expect([...granted].sort()).toEqual([...new Set([...scriptCommands(), ...NODE_COMMANDS])].sort());
    expect(rules.filter((r) => !r.startsWith('~') && !r.startsWith('+'))).toEqual([]);
  });

  it('without +info: ioredis warns that INFO is denied on every connection', async () => {
    const redis = await startRedis();
    servers.push(redis);
    await addUser(
      redis.port,
      readmeRules().filter((r) => r !== '+info'),
    );
    const seen = await warnings(async () => {
      const { svc } = await service(`redis://ratelimit:secret@127.0.0.1:${redis.port}`);
      expect((await svc.consume({ algorithm: 'gcra', limit: 1, window: '1s' }, 'x')).reason).toBeUndefined();
    });
    expect(seen.join('\n')).toContain('Skipping the ready check because INFO command fails');
  });

  it('the client the library creates (a URL), and through Sentinel: no warning, nothing denied', async () => {
    const redis = await startRedis();
    servers.push(redis);
    await addUser(redis.port, readmeRules());
    const setup = await startRedisSentinel({ replicas: 1, sentinels: 1, quorum: 1 });
    servers.push(setup);
    // ACL users are per server: the replica (a master after a failover) needs one too.
    for (const server of [setup.master, ...setup.replicas]) await addUser(server.port, readmeRules());
    const seen = await warnings(async () => {
      const direct = await service(`redis://ratelimit:secret@127.0.0.1:${redis.port}`);
      await everything(direct.svc, () => flushScripts([redis.port]), direct.store);
      const viaSentinel = await service({ sentinels: setup.sentinelAddresses, name: setup.name, ...USER });
      await everything(viaSentinel.svc, () => flushScripts([setup.master.port]), viaSentinel.store);
    });
    expect(seen).toEqual([]);
    expect([...(await deniedOn(redis.port)), ...(await deniedOn(setup.master.port))]).toEqual([]);
  }, 60_000);

  describe.each(REDIS_CLIENTS.map((k) => k.name))('%s', (name) => {
    it('a client of yours on a standalone server: every call decided by Redis, nothing denied', async () => {
      const redis = await startRedis();
      servers.push(redis);
      await addUser(redis.port, readmeRules());
      const client = await connectAsUser(name, [redis.port], false);
      closers.push(() => kindOf(name).close(client));
      const { svc, store } = await service(client);
      await everything(svc, () => flushScripts([redis.port]), store);
      await wrongType(client, redis.port);
      expect(await deniedOn(redis.port)).toEqual([]);
    }, 30_000);

    it('a cluster client of yours on a 3-master Cluster: every call decided by Redis, nothing denied on any node', async () => {
      const cluster = await startRedisCluster(3);
      servers.push(cluster);
      const ports = cluster.nodes.map((n) => n.port);
      for (const port of ports) await addUser(port, readmeRules());
      const client = await connectAsUser(name, ports, true);
      closers.push(() => kindOf(name).close(client));
      const { svc, store } = await service(client);
      await everything(svc, () => flushScripts(ports), store);
      const denied: string[] = [];
      for (const port of ports) denied.push(...(await deniedOn(port)));
      expect(denied).toEqual([]);
    }, 60_000);
  });
});
