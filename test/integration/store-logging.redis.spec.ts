/**
 * What the module says about its store, on real Nest apps and real redis-servers:
 *  - one startup line naming the store: process memory, or Redis at host:port (from a URL with a password,
 *    ioredis options, a client passed in, a Cluster's startup nodes, a running Sentinel, TLS), never a password;
 *  - a Redis that cannot be reached is reported with its address and the cause (refused, wrong password, no
 *    password, a TLS certificate not trusted), and startup does not wait out its 5 s for a refused or denied
 *    connection;
 *  - a `redis` string that is not a redis:// or rediss:// URL fails at bootstrap;
 *  - recovery is logged once per outage: after a lost connection (the library's client and a client passed
 *    in) and after a connection never established at startup.
 */
import { Controller, Get, Logger, type INestApplication } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { describeStore } from '../../lib/stores/store-description';
import { bootApp, sleep } from '../e2e/harness';
import { fieldMembers, secondsOver, timed } from '../support/rate-limit-fields';
import { freePort, libraryCluster, startRedis, startRedisCluster, startRedisSentinel, type RedisProcess } from '../support/redis-server';
import { startRedisTls, type RedisTlsProcess } from '../support/redis-tls';

@Controller()
class PingController {
  @Get('ping')
  @RateLimit('fixed-window', 1_000, '1h')
  ping() {
    return 'pong';
  }
}

const PASSWORD = 's3cret-pa55';
const MEMORY_LINE = 'Rate limits are kept in process memory (per process — set `redis` to share limits between instances).';
const STARTING_ANYWAY = "Starting anyway; deciding with each policy's onStoreError until it answers.";
const UNTIL_IT_ANSWERS = "Deciding with each policy's onStoreError until it answers again.";

interface Line {
  level: 'log' | 'warn';
  context: string | undefined;
  message: string;
}

let lines: Line[] = [];
const apps: INestApplication[] = [];
const servers: RedisProcess[] = [];
const clients: Array<Redis | Cluster> = [];

beforeEach(() => {
  lines = [];
  for (const level of ['log', 'warn'] as const) {
    jest.spyOn(Logger.prototype, level).mockImplementation(function (this: Logger, ...args: unknown[]) {
      lines.push({ level, context: (this as unknown as { context?: string }).context, message: String(args[0]) });
    });
  }
});

afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
  for (const client of clients.splice(0)) client.disconnect();
  for (const server of servers.splice(0)) await server.stop(true);
  jest.restoreAllMocks();
});

/** The RateLimit lines at `level`, in order. */
function logged(level: Line['level']): string[] {
  return lines.filter((l) => l.level === level && l.context === 'RateLimit').map((l) => l.message);
}

async function boot(options: RateLimitModuleOptions): Promise<INestApplication> {
  const app = await bootApp({ adapter: 'express', imports: [RateLimitModule.forRoot(options)], controllers: [PingController] });
  apps.push(app);
  return app;
}

async function server(port?: number): Promise<RedisProcess> {
  const redis = await startRedis([], port);
  servers.push(redis);
  return redis;
}

/** A server that also speaks TLS, on a self-signed certificate. */
async function tlsServer(): Promise<RedisTlsProcess> {
  const redis = await startRedisTls();
  servers.push(redis);
  return redis;
}

/** A server that requires PASSWORD (set once it runs: the start-up probe of the support helper has none). */
async function passwordServer(): Promise<RedisProcess> {
  const redis = await server();
  const admin = new Redis(redis.url);
  await admin.config('SET', 'requirepass', PASSWORD);
  admin.disconnect();
  return redis;
}

/** A client of the user's own, with ioredis defaults and its own error listener. */
function userClient(url: string): Redis {
  const client = new Redis(url);
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const ping = (app: INestApplication) => request(app.getHttpServer()).get('/ping');
/** The startup line of a store that answered: its PING time and what the deadline counts. */
const answered = (name: string) =>
  expect.stringMatching(
    new RegExp(
      `^${escape(name)} answered PING in [\\d.]+ ms \\(event-loop delay [\\d.]+ ms\\); a decision waits up to storeTimeoutMs \\(\\d+ ms\\) of its time, this process's own stalls not counted\\.$`,
    ),
  );

/** GETs /ping every 20 ms until it answers `status`; fails after `limitMs`. */
async function until(app: INestApplication, status: number, limitMs: number): Promise<void> {
  const started = Date.now();
  while ((await ping(app)).status !== status) {
    if (Date.now() - started > limitMs) throw new Error(`/ping did not answer ${status} within ${limitMs} ms`);
    await sleep(20);
  }
}

describe('the startup line names the store', () => {
  it('the memory store', async () => {
    await boot({});
    expect(logged('log')).toEqual([MEMORY_LINE]);
    expect(logged('warn')).toEqual([]);
  });

  it('Redis from a URL with a password: host:port, and the password nowhere', async () => {
    const redis = await passwordServer();
    const app = await boot({ redis: `redis://default:${PASSWORD}@127.0.0.1:${redis.port}` });
    expect(logged('log')).toEqual([
      `Rate limits are kept in Redis at 127.0.0.1:${redis.port}.`,
      answered(`Redis at 127.0.0.1:${redis.port}`),
    ]);
    expect(logged('warn')).toEqual([]);
    // Decided by Redis: a fallback would leave all 1,000 (and send no RateLimit member at all).
    const { res, before, after } = await timed(() => ping(app));
    const members = fieldMembers(res.headers['ratelimit'])!;
    expect(members).toEqual([{ name: 'default', r: 999, t: expect.any(Number) }]);
    // A fixed hour: the next unit comes back at its end.
    expect(secondsOver(before, after, (now) => 3_600_000 - (now % 3_600_000))).toContain(members[0].t);
    expect(lines.filter((l) => l.message.includes(PASSWORD))).toEqual([]);
  });

  it('Redis from ioredis options', async () => {
    const redis = await passwordServer();
    await boot({ redis: { host: '127.0.0.1', port: redis.port, password: PASSWORD } });
    expect(logged('log')).toEqual([
      `Rate limits are kept in Redis at 127.0.0.1:${redis.port}.`,
      answered(`Redis at 127.0.0.1:${redis.port}`),
    ]);
    expect(logged('warn')).toEqual([]);
  });

  it('Redis from a client passed in', async () => {
    const redis = await server();
    await boot({ redis: userClient(redis.url) });
    expect(logged('log')).toEqual([
      `Rate limits are kept in Redis at 127.0.0.1:${redis.port}.`,
      answered(`Redis at 127.0.0.1:${redis.port}`),
    ]);
    expect(logged('warn')).toEqual([]);
  });

  it('a Redis Cluster, by its startup nodes', async () => {
    const cluster = await startRedisCluster();
    try {
      const client = await libraryCluster(cluster.startupNodes);
      clients.push(client);
      await boot({ redis: client });
      const nodes = cluster.nodes.map((n) => `127.0.0.1:${n.port}`).join(', ');
      expect(logged('log')).toEqual([`Rate limits are kept in Redis Cluster (${nodes}).`, answered(`Redis Cluster (${nodes})`)]);
      expect(logged('warn')).toEqual([]);
    } finally {
      for (const app of apps.splice(0)) await app.close();
      for (const client of clients.splice(0)) client.disconnect();
      await cluster.stop();
    }
  }, 60_000);

  it('a running Sentinel: the master name and the sentinel asked', async () => {
    const sentinel = await startRedisSentinel({ name: 'limits', replicas: 0, sentinels: 1, quorum: 1 });
    try {
      const app = await boot({ redis: { sentinels: sentinel.sentinelAddresses, name: sentinel.name } });
      expect(logged('log')).toEqual([
        `Rate limits are kept in Redis Sentinel master "limits" via 127.0.0.1:${sentinel.sentinels[0].port}.`,
        answered(`Redis Sentinel master "limits" via 127.0.0.1:${sentinel.sentinels[0].port}`),
      ]);
      expect(logged('warn')).toEqual([]);
      // Decided by the master the sentinel named: a fallback would leave all 1,000.
      expect((await ping(app)).headers['ratelimit']).toMatch(/^"default";r=999;t=\d+$/);
    } finally {
      for (const app of apps.splice(0)) await app.close();
      await sentinel.stop();
    }
  }, 30_000);

  it('Redis over TLS, given the CA of its certificate', async () => {
    const redis = await tlsServer();
    const app = await boot({ redis: { host: '127.0.0.1', port: redis.tlsPort, tls: { ca: redis.certificate } } });
    expect(logged('log')).toEqual([
      `Rate limits are kept in Redis at 127.0.0.1:${redis.tlsPort}.`,
      answered(`Redis at 127.0.0.1:${redis.tlsPort}`),
    ]);
    expect(logged('warn')).toEqual([]);
    expect((await ping(app)).headers['ratelimit']).toMatch(/^"default";r=999;t=\d+$/);
  });

  it('Sentinel options, Cluster nodes of every form and IPv6 addresses (no connection)', () => {
    const cluster = new Cluster([`redis://:${PASSWORD}@10.0.0.1:7000`, 7001, '10.0.0.2:7002', { host: '10.0.0.3', port: 7003 }], {
      lazyConnect: true,
    });
    clients.push(cluster);
    expect(describeStore({ sentinels: [{ host: '10.0.0.1', port: 26380 }, { host: '10.0.0.2' }], name: 'cache', password: PASSWORD })).toBe(
      'Rate limits are kept in Redis Sentinel master "cache" via 10.0.0.1:26380, 10.0.0.2:26379.',
    );
    expect(describeStore(cluster)).toBe(
      'Rate limits are kept in Redis Cluster (10.0.0.1:7000, 127.0.0.1:7001, 10.0.0.2:7002, 10.0.0.3:7003).',
    );
    expect(describeStore(`rediss://user:${PASSWORD}@[::1]`)).toBe('Rate limits are kept in Redis at [::1]:6379.');
    expect(describeStore({ path: '/run/redis.sock' })).toBe('Rate limits are kept in Redis at /run/redis.sock.');
  });
});

describe('a Redis that cannot be reached is named with the cause, and startup does not wait it out', () => {
  it('nothing listening: ECONNREFUSED', async () => {
    const port = await freePort();
    const started = Date.now();
    const app = await boot({ redis: `redis://127.0.0.1:${port}`, onStoreError: 'fail-closed' });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(logged('log')).toEqual([`Rate limits are kept in Redis at 127.0.0.1:${port}.`]);
    expect(logged('warn')).toEqual([
      `Redis at 127.0.0.1:${port} is not reachable: connect ECONNREFUSED 127.0.0.1:${port}. ${STARTING_ANYWAY}`,
    ]);
    // The app started; requests get onStoreError, and the outage is not reported again within the interval.
    expect((await ping(app)).status).toBe(503);
    expect(logged('warn')).toHaveLength(1);
  });

  it('a wrong password: WRONGPASS, and the password nowhere', async () => {
    const redis = await passwordServer();
    const started = Date.now();
    await boot({ redis: `redis://:wrong-${PASSWORD}@127.0.0.1:${redis.port}` });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(logged('warn')).toEqual([
      `Redis at 127.0.0.1:${redis.port} is not reachable: WRONGPASS invalid username-password pair or user is disabled. ${STARTING_ANYWAY}`,
    ]);
    expect(lines.filter((l) => l.message.includes(PASSWORD))).toEqual([]);
  });

  it('no password: NOAUTH', async () => {
    const redis = await passwordServer();
    await boot({ redis: redis.url });
    // Redis words NOAUTH after AUTH or HELLO differently (ioredis 6 opens with HELLO 3).
    const warnings = logged('warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      new RegExp(`^Redis at 127\\.0\\.0\\.1:${redis.port} is not reachable: NOAUTH [^]+[^.]\\. ${escape(STARTING_ANYWAY)}$`),
    );
  });

  it('a client passed in that is refused', async () => {
    const port = await freePort();
    const started = Date.now();
    await boot({ redis: userClient(`redis://127.0.0.1:${port}`) });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(logged('warn')).toEqual([
      `Redis at 127.0.0.1:${port} is not reachable: connect ECONNREFUSED 127.0.0.1:${port}. ${STARTING_ANYWAY}`,
    ]);
  });

  it('rediss:// to a self-signed certificate and no CA: the certificate, once, and the app serves', async () => {
    const redis = await tlsServer();
    const started = Date.now();
    const app = await boot({ redis: redis.tlsUrl, onStoreError: 'fail-closed' });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(logged('log')).toEqual([`Rate limits are kept in Redis at 127.0.0.1:${redis.tlsPort}.`]);
    expect(logged('warn')).toEqual([`Redis at 127.0.0.1:${redis.tlsPort} is not reachable: self-signed certificate. ${STARTING_ANYWAY}`]);
    // Requests get onStoreError while the handshake keeps failing, and the cause is not reported again.
    for (let i = 0; i < 3; i++) expect((await ping(app)).status).toBe(503);
    expect(logged('warn')).toHaveLength(1);
  });
});

describe('a redis string that is not a redis:// or rediss:// URL fails at bootstrap', () => {
  const allowed =
    'must be a URL starting with redis:// (or rediss:// for TLS), for example redis://localhost:6379; ioredis options (such as { path } ' +
    'for a Unix socket) or a client instance (ioredis, node-redis, Valkey GLIDE) work too.';

  it.each([
    ['"http://localhost:6379"', 'http://localhost:6379'],
    ['"localhost:6379"', 'localhost:6379'],
    ['"http://admin:***@cache:6379/0"', `http://admin:${PASSWORD}@cache:6379/0`],
    ['"cache:6379?password=***&db=1"', `cache:6379?password=${PASSWORD}&db=1`],
  ])('%s', async (shown, redis) => {
    await expect(boot({ redis })).rejects.toMatchObject({
      name: 'RateLimitConfigError',
      message: `RateLimitModule options: redis: ${shown} ${allowed}`,
    });
    expect(lines.filter((l) => l.message.includes(PASSWORD))).toEqual([]);
  });
});

describe('recovery is logged once per outage', () => {
  const recovered = (port: number) => new RegExp(`^Redis at 127\\.0\\.0\\.1:${port} is answering again after \\d+\\.\\d s\\.$`);

  /** Stops `redis`, has a request reported unavailable, restarts it and waits for Redis to decide again. */
  async function outage(app: INestApplication, redis: RedisProcess): Promise<void> {
    await redis.stop();
    await until(app, 503, 2_000);
    await redis.restart();
    await until(app, 200, 5_000);
    for (let i = 0; i < 5; i++) expect((await ping(app)).status).toBe(200);
  }

  it("the library's client: a lost connection", async () => {
    const redis = await server();
    const app = await boot({ redis: redis.url, onStoreError: 'fail-closed', storeTimeoutMs: 50, storeErrorLogIntervalMs: 60_000 });
    expect((await ping(app)).status).toBe(200);
    await redis.stop();
    // The client's first reconnect attempt (after 100 ms) is refused: that is the cause named.
    await sleep(300);
    expect((await ping(app)).status).toBe(503);
    expect(logged('warn')).toEqual([
      `Redis at 127.0.0.1:${redis.port} is not reachable: connect ECONNREFUSED 127.0.0.1:${redis.port}. ${UNTIL_IT_ANSWERS}`,
    ]);
    await redis.restart();
    await until(app, 200, 5_000);
    for (let i = 0; i < 5; i++) expect((await ping(app)).status).toBe(200);
    const log = logged('log');
    expect(log).toHaveLength(3);
    expect(log[1]).toEqual(answered(`Redis at 127.0.0.1:${redis.port}`));
    expect(log[2]).toMatch(recovered(redis.port));
  });

  it('a client passed in: a lost connection, twice (one line per reported outage)', async () => {
    const redis = await server();
    const app = await boot({ redis: userClient(redis.url), onStoreError: 'fail-closed', storeTimeoutMs: 50, storeErrorLogIntervalMs: 0 });
    await outage(app, redis);
    await outage(app, redis);
    // Every failure warns (interval 0), yet each outage ends with one line.
    expect(logged('warn').length).toBeGreaterThanOrEqual(2);
    expect(logged('warn').every((w) => w.startsWith(`Redis at 127.0.0.1:${redis.port} is not reachable: `))).toBe(true);
    const log = logged('log');
    expect(log).toHaveLength(4);
    expect(log[1]).toEqual(answered(`Redis at 127.0.0.1:${redis.port}`));
    expect(log[2]).toMatch(recovered(redis.port));
    expect(log[3]).toMatch(recovered(redis.port));
  });

  it('a connection never established at startup', async () => {
    const port = await freePort();
    const app = await boot({ redis: `redis://127.0.0.1:${port}`, onStoreError: 'fail-closed', storeTimeoutMs: 50 });
    expect(logged('warn')).toHaveLength(1);
    await server(port);
    await until(app, 200, 5_000);
    for (let i = 0; i < 5; i++) expect((await ping(app)).status).toBe(200);
    expect(logged('warn')).toHaveLength(1);
    const log = logged('log');
    expect(log).toHaveLength(2);
    expect(log[1]).toMatch(recovered(port));
  });
});
