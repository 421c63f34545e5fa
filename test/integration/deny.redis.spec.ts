/**
 * The deny list: `deny(tracker, until, reason)` rejects every policy and every call of that tracker, on every
 * instance, until then; `allow()` lifts it; `denied()` reports it. Exact on the memory store (fake clock).
 * A key names a tracker as every RateLimiterService method reads it (a plain key K is the tracker by:K, stored
 * as `by%3AK` in the hash tag). On a real Redis and a 3-node Cluster: one deny key per tracker in its hash tag, read with one GET per
 * decision (not per policy), and two services on one store stand for two instances: each answers a tracker
 * it knows to be denied without a round trip (counted by the server) until its re-check interval has passed
 * on its own clock (injected here, so "within the interval" is exact), and a fallback never admits it.
 */
import type { Cluster, Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import { RateLimitStoreError } from '../../lib/errors/rate-limit-store.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { createStore } from '../../lib/pipeline/create-store';
import { DENY_RECHECK_MS } from '../../lib/pipeline/deny-list';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { memoryHarness, T0 } from '../support/memory-harness';
import {
  libraryClient,
  libraryCluster,
  startRedis,
  startRedisCluster,
  type RedisClusterProcess,
  type RedisProcess,
} from '../support/redis-server';

const registry = new RateLimitAlgorithmRegistry();
const A: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: '1m', name: 'a' };
const B: RateLimitPolicy = { algorithm: 'gcra', limit: 10, window: '1m', name: 'b' };
const C: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: '1m', name: 'c' };
const LEASES: RateLimitPolicy = { algorithm: 'concurrency', limit: 2, window: '1m', name: 'leases' };

describe('deny list on the memory store (exact)', () => {
  it('rejects every policy and call of the tracker until the end, as a lockout, and charges nothing', async () => {
    const { limiter, advance } = memoryHarness();
    await limiter.deny('user:1', '1m', 'abuse');
    const denied = { allowed: false, reason: 'blocked', remaining: 0, retryAfterMs: 60_000, resetMs: 60_000, moreQuotaMs: 60_000 };
    expect(await limiter.consume(A, 'user:1')).toMatchObject({ ...denied, policy: 'a', limit: 5 });
    expect(await limiter.peek(B, 'user:1')).toMatchObject({ ...denied, policy: 'b', limit: 10 });
    const all = await limiter.consumeAll([A, B], 'user:1');
    expect(all.allowed).toBe(false);
    expect(all.decisions).toMatchObject([denied, denied]);
    expect((await limiter.lease(LEASES, 'user:1')).decision).toMatchObject(denied);
    expect(await limiter.consume(A, 'user:2')).toMatchObject({ allowed: true, remaining: 4 });
    advance(59_999);
    expect(await limiter.consume(A, 'user:1')).toMatchObject({ ...denied, retryAfterMs: 1, resetMs: 1, moreQuotaMs: 1 });
    advance(1);
    expect(await limiter.consume(A, 'user:1')).toMatchObject({ allowed: true, remaining: 4 });
  });

  it('denied() reports the end on the store clock and the reason; undefined once it has ended', async () => {
    const { limiter, advance } = memoryHarness();
    expect(await limiter.denied('user:1')).toBeUndefined();
    await limiter.deny('user:1', '10s', 'credential stuffing');
    expect(await limiter.denied('user:1')).toEqual({ until: new Date(T0 + 10_000), reason: 'credential stuffing' });
    await limiter.deny('user:2', 5_000);
    expect(await limiter.denied('user:2')).toEqual({ until: new Date(T0 + 5_000) });
    advance(10_000);
    expect(await limiter.denied('user:1')).toBeUndefined();
  });

  it('never shortens a deny: the later end wins, with its reason; allow() then deny() shortens', async () => {
    const { limiter } = memoryHarness();
    await limiter.deny('user:1', '1m', 'first');
    await limiter.deny('user:1', '10s', 'second');
    expect(await limiter.denied('user:1')).toEqual({ until: new Date(T0 + 60_000), reason: 'first' });
    await limiter.deny('user:1', '2m', 'third');
    expect(await limiter.denied('user:1')).toEqual({ until: new Date(T0 + 120_000), reason: 'third' });
    await limiter.allow('user:1');
    expect(await limiter.consume(A, 'user:1')).toMatchObject({ allowed: true });
    await limiter.deny('user:1', '10s');
    expect(await limiter.consume(A, 'user:1')).toMatchObject({ allowed: false, retryAfterMs: 10_000 });
  });

  it('takes a date on the store clock', async () => {
    const { limiter } = memoryHarness();
    await limiter.deny('user:1', new Date(T0 + 5_000));
    expect(await limiter.consume(A, 'user:1')).toMatchObject({ allowed: false, retryAfterMs: 5_000 });
  });

  it('stops new leases but not the renewal of one held, as a lockout does', async () => {
    const { limiter } = memoryHarness();
    const held = await limiter.lease(LEASES, 'user:1');
    expect(held.decision.allowed).toBe(true);
    await limiter.deny('user:1', '1m');
    expect((await limiter.lease(LEASES, 'user:1')).decision).toMatchObject({ allowed: false, reason: 'blocked' });
    expect(await held.extend()).toBe(true);
  });

  it('leaves lockouts and counters alone: reset and unblock do not lift a deny', async () => {
    const { limiter } = memoryHarness();
    await limiter.deny('user:1', '1m');
    await limiter.reset(A, 'user:1');
    await limiter.unblock(A, 'user:1');
    expect(await limiter.consume(A, 'user:1')).toMatchObject({ allowed: false, retryAfterMs: 60_000 });
  });

  describe('validation', () => {
    const { limiter } = memoryHarness();
    const cases: Array<[string, () => Promise<unknown>, string]> = [
      [
        'a zero duration',
        () => limiter.deny('k', 0),
        "deny: until: 0 is not a valid duration; use a positive whole number of milliseconds or a string such as '250ms', '1s', '1m', '1h', '1d'.",
      ],
      [
        'more than 100 years',
        () => limiter.deny('k', '36600d'),
        'deny: until: "36600d" is more than 100 years away; deny for at most 3155760000000 ms.',
      ],
      [
        'a date in the past',
        () => limiter.deny('k', new Date(T0 - 1)),
        "deny: until: 2023-11-14T22:13:19.999Z is not in the future (the store's clock reads 2023-11-14T22:13:20.000Z).",
      ],
      ['an invalid date', () => limiter.deny('k', new Date(Number.NaN)), 'deny: until: Invalid Date is not a valid date.'],
      ['a long reason', () => limiter.deny('k', '1m', 'x'.repeat(257)), 'deny: reason: 257 characters; at most 256 are kept.'],
      [
        'a lone surrogate',
        () => limiter.deny('k', '1m', 'bad \ud800'),
        'deny: reason: "bad \\ud800" has half of a UTF-16 surrogate pair alone, which Redis cannot store.',
      ],
      [
        'an empty key',
        () => limiter.deny('', '1m'),
        `key: "" must be a non-empty string ('ip:<address>', 'user:<id>', or what a by function returns).`,
      ],
      [
        'a bare IP address',
        () => limiter.deny('203.0.113.7', '1m'),
        "key: \"203.0.113.7\" is a bare IP address, which names no tracker: write 'ip:203.0.113.7' for the client at that address, or 'by:203.0.113.7' for a value your by function returns.",
      ],
      [
        'an ip: key that is no address',
        () => limiter.allow('ip:gateway'),
        "key: \"ip:gateway\": \"gateway\" is not an IP address; write 'ip:' before an IPv4 or IPv6 address (such as 'ip:203.0.113.7'), or 'by:ip:gateway' for a value your by function returns.",
      ],
      ['a reason that is not a string', () => limiter.deny('k', '1m', 42 as never), 'deny: reason: 42 must be a string.'],
    ];
    it.each(cases)('rejects %s, saying what is allowed', async (_, call, message) => {
      const error = await call().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimitConfigError);
      expect((error as Error).message).toBe(message);
    });
  });
});

/** A service with its own engine (an "instance") on `store`, whose deny cache reads `clock`. */
function instance(store: RateLimitStore, clock: { now: number }): RateLimiterService {
  return new RateLimiterService(new RateLimitEngine(store, { clock: () => clock.now }), registry, { prefix: 'rl' });
}

/** Completed script runs and GETs (every GET is one a script ran) since the last RESETSTAT, over `nodes`. */
async function stats(nodes: Redis[]): Promise<{ scripts: number; gets: number }> {
  let scripts = 0;
  let gets = 0;
  for (const node of nodes) {
    const info = await node.info('commandstats');
    for (const m of info.matchAll(/cmdstat_(?:evalsha|eval):calls=(\d+)/g)) scripts += Number(m[1]);
    gets += Number(/cmdstat_get:calls=(\d+)/.exec(info)?.[1] ?? 0);
  }
  return { scripts, gets };
}

let trackers = 0;
const tracker = () => `deny-${process.pid}-${++trackers}`;

/** Scenarios for a real store: `client` is the connection the stores use, `nodes` every master (for stats). */
function realStoreScenarios(name: string, setup: () => { client: Redis | Cluster; nodes: Redis[] }) {
  describe(name, () => {
    const resetStats = () => Promise.all(setup().nodes.map((n) => n.config('RESETSTAT')));

    it('keeps one key per denied tracker in its hash tag, with the end, the reason and a TTL; allow deletes it', async () => {
      const { client } = setup();
      const limiter = instance(createStore({ redis: client, prefix: 'rl' }, registry), { now: 0 });
      const key = tracker();
      await limiter.deny(key, '1m', 'abuse: 50 failed logins');
      const value = await client.get(`rl:{by%3A${key}}:deny`);
      expect(value).toMatch(/^\d{13}\|abuse: 50 failed logins$/);
      const ttl = await client.pttl(`rl:{by%3A${key}}:deny`);
      expect(ttl).toBeGreaterThan(59_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      const until = Number(value!.split('|')[0]);
      expect(await limiter.denied(key)).toEqual({ until: new Date(until), reason: 'abuse: 50 failed logins' });
      await limiter.allow(key);
      expect(await client.exists(`rl:{by%3A${key}}:deny`)).toBe(0);
      expect(await limiter.denied(key)).toBeUndefined();
    });

    it('keys a deny by the tracker its key names: ip: normalised as the guard does, a plain key as by:<key>', async () => {
      const { client } = setup();
      const limiter = instance(createStore({ redis: client, prefix: 'rl' }, registry), { now: 0 });
      const key = tracker();
      await limiter.deny(key, '1m');
      await limiter.deny(`by:${key}-explicit`, '1m');
      await limiter.deny('ip:::ffff:203.0.113.7', '1m');
      await limiter.deny('ip:2001:db8::1', '1m');
      await limiter.deny(`user:${key}`, '1m');
      for (const stored of [
        `by%3A${key}`,
        `by%3A${key}-explicit`,
        'ip%3A203.0.113.7',
        'ip%3A2001%3Adb8%3A0%3A0%3A%3A%2F64',
        `user%3A${key}`,
      ])
        expect([stored, await client.exists(`rl:{${stored}}:deny`)]).toEqual([stored, 1]);
      expect(await limiter.denied(`by:${key}`)).toBeDefined();
      expect(await limiter.denied(`${key}-explicit`)).toBeDefined();
      expect(await limiter.denied('ip:203.0.113.7')).toBeDefined();
      expect(await limiter.denied('ip:2001:db8:0:0::/64')).toBeDefined();
      expect(await limiter.denied(`by:user:${key}`)).toBeUndefined();
      for (const key of ['ip:203.0.113.7', 'ip:2001:db8::1']) await limiter.allow(key);
    });

    it('reads the deny key once per decision, not per policy, in the same single script call', async () => {
      const { client, nodes } = setup();
      const limiter = instance(new RedisStore(client, registry.all(), false), { now: 0 });
      const key = tracker();
      await limiter.consumeAll([A, C], key);
      await resetStats();
      expect((await limiter.consumeAll([A, C], key)).allowed).toBe(true);
      // The deny key, then per policy its lockout key (a fixed-window counter is charged with INCRBY, not read).
      expect(await stats(nodes)).toEqual({ scripts: 1, gets: 3 });
      await limiter.deny(key, '1m');
      const other = instance(new RedisStore(client, registry.all(), false), { now: 0 });
      await resetStats();
      const denied = await other.consumeAll([A, C], key);
      expect(denied.allowed).toBe(false);
      expect(denied.decisions.map((d) => d.reason)).toEqual(['blocked', 'blocked']);
      // A denied decision stops at the deny key.
      expect(await stats(nodes)).toEqual({ scripts: 1, gets: 1 });
    });

    it('two instances: the other learns the deny from one reply, then answers it alone until its re-check', async () => {
      const { client, nodes } = setup();
      const clockA = { now: 0 };
      const clockB = { now: 0 };
      const a = instance(createStore({ redis: client, prefix: 'rl' }, registry), clockA);
      const b = instance(createStore({ redis: client, prefix: 'rl' }, registry), clockB);
      const key = tracker();
      expect(await b.consume(A, key)).toMatchObject({ allowed: true, remaining: 4 });
      await a.deny(key, '1m', 'abuse');

      await resetStats();
      const first = await b.consume(A, key);
      expect(first).toMatchObject({ allowed: false, reason: 'blocked', remaining: 0 });
      expect(first.retryAfterMs).toBeGreaterThan(59_000);
      expect(first.retryAfterMs).toBeLessThanOrEqual(60_000);
      expect(await stats(nodes)).toMatchObject({ scripts: 1 });

      await resetStats();
      for (let i = 0; i < 5; i++)
        expect(await b.consume(i % 2 ? A : B, key)).toMatchObject({ allowed: false, retryAfterMs: first.retryAfterMs });
      clockB.now += 300;
      expect(await b.peek(A, key)).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: first.retryAfterMs - 300 });
      expect(await stats(nodes)).toEqual({ scripts: 0, gets: 0 });

      await a.allow(key);
      // At once where it was called; on the other instance, within its re-check interval.
      expect(await a.consume(A, key)).toMatchObject({ allowed: true, remaining: 3 });
      clockB.now += DENY_RECHECK_MS - 301;
      expect(await b.consume(A, key)).toMatchObject({ allowed: false, reason: 'blocked' });
      clockB.now += 1;
      expect(await b.consume(A, key)).toMatchObject({ allowed: true, remaining: 2 });
      expect(await b.consume(A, key)).toMatchObject({ allowed: true, remaining: 1 });
    });

    it('an instance that denied answers the tracker alone from the start; another tracker still goes to the store', async () => {
      const { client, nodes } = setup();
      const a = instance(createStore({ redis: client, prefix: 'rl' }, registry), { now: 0 });
      const key = tracker();
      await a.deny(key, '1h');
      await resetStats();
      expect((await a.consume(A, key)).retryAfterMs).toBeGreaterThan(3_599_000);
      expect(await a.consume(A, tracker())).toMatchObject({ allowed: true, remaining: 4 });
      expect(await stats(nodes)).toMatchObject({ scripts: 1 });
    });

    it('deny never shortens on the store either, and takes a date', async () => {
      const { client } = setup();
      const limiter = instance(createStore({ redis: client, prefix: 'rl' }, registry), { now: 0 });
      const key = tracker();
      await limiter.deny(key, '1h', 'long');
      await limiter.deny(key, '1m', 'short');
      const denial = await limiter.denied(key);
      expect(denial?.reason).toBe('long');
      expect(denial!.until.getTime() - Date.now()).toBeGreaterThan(3_590_000);
      const dated = tracker();
      const at = new Date(Date.now() + 30_000);
      await limiter.deny(dated, at);
      // The store's clock is this machine's: within the time the calls took.
      expect(Math.abs((await limiter.denied(dated))!.until.getTime() - at.getTime())).toBeLessThan(1_000);
    });
  });
}

describe('deny list on a real Redis', () => {
  let server: RedisProcess;
  let client: Redis;

  beforeAll(async () => {
    server = await startRedis();
    client = await libraryClient(server.url);
  }, 30_000);

  afterAll(async () => {
    client?.disconnect();
    await server?.stop();
  });

  realStoreScenarios('standalone', () => ({ client, nodes: [client] }));

  it("names a deny key that holds someone else's data, and leaves it alone", async () => {
    const limiter = instance(new RedisStore(client, registry.all(), false), { now: 0 });
    const key = tracker();
    await client.hset(`rl:{by%3A${key}}:deny`, 'field', 'value');
    const error = await limiter.consume(A, key).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RateLimitStoreError);
    expect((error as Error).message).toBe(
      `Redis key "rl:{by%3A${key}}:deny" holds a hash, but the deny list keeps a string there: another ` +
        `application writes under this prefix. Give the rate limiter its own 'prefix' or delete the key.`,
    );
    expect(await client.type(`rl:{by%3A${key}}:deny`)).toBe('hash');
  });

  it('a fallback never admits a tracker known to be denied; deny and denied reject while the store is away', async () => {
    const own = await startRedis();
    const ownClient = await libraryClient(own.url);
    try {
      const clock = { now: 0 };
      const limiter = instance(createStore({ redis: ownClient, prefix: 'rl', onStoreError: 'fail-open' }, registry), clock);
      const key = tracker();
      await limiter.deny(key, '1h');
      // Past the re-check: the next decision asks the store, which is gone, and the fail-open fallback answers.
      clock.now += DENY_RECHECK_MS;
      await own.stop();
      const d = await limiter.consume(A, key);
      expect(d).toMatchObject({ allowed: false, reason: 'blocked' });
      expect(d.retryAfterMs).toBeGreaterThan(3_590_000);
      expect(await limiter.consume(A, tracker())).toMatchObject({ allowed: true, reason: 'store-unavailable' });
      await expect(limiter.denied(key)).rejects.toThrow(RateLimitStoreError);
      await expect(limiter.deny(tracker(), '1m')).rejects.toThrow();
    } finally {
      ownClient.disconnect();
      await own.stop();
    }
  });
});

describe('deny list on a 3-node Redis Cluster', () => {
  let cluster: RedisClusterProcess;
  let client: Cluster;

  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    client = await libraryCluster(cluster.startupNodes);
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await cluster?.stop();
  });

  realStoreScenarios('cluster', () => ({ client, nodes: client.nodes('master') }));

  it("keeps the deny key in the tracker's slot, beside its counters", async () => {
    const limiter = instance(new RedisStore(client, registry.all(), false), { now: 0 });
    const key = tracker();
    await limiter.consume(A, key);
    await limiter.deny(key, '1m');
    const byNode = await Promise.all(client.nodes('master').map(async (node) => (await node.keys(`rl:{by%3A${key}}:*`)).sort()));
    expect(byNode.filter((keys) => keys.length > 0)).toEqual([[`rl:{by%3A${key}}:deny`, `rl:{by%3A${key}}:svc:a:fw`]]);
  });
});
