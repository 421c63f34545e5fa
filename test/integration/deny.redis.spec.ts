/**
 * The deny list: `deny(tracker, until, reason)` rejects every policy and every call of that tracker, on every
 * instance, until then; `allow()` lifts it; `denied()` reports it. Exact on the memory store (fake clock).
 * A key names a tracker as every RateLimiterService method reads it (a plain key K is the tracker by:K, stored
 * as `by%3AK` in the hash tag). On a real Redis and a 3-node Cluster: each deny lives in the channel the runtime
 * overrides use (`<prefix>:{overrides}:denies…`) and in the tracker's 1.0 deny key (for 1.0 instances during a
 * rolling upgrade); no decision script reads either. Two services on one store stand for two instances, each
 * polled by hand (its 500 ms timer is not started), on its own injected clock: the one that denies rejects at
 * once, the other from its next poll, which reads only what changed (counted by the server); every deny in force
 * is answered with no round trip, also while the store is away.
 */
import type { Cluster, Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import { RateLimitStoreError } from '../../lib/errors/rate-limit-store.error';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { createStore } from '../../lib/pipeline/create-store';
import { MAX_DENIES } from '../../lib/pipeline/deny-list';
import { MAX_DENY_LOG } from '../../lib/stores/deny-bounds';
import { hashSlot } from '../../lib/stores/redis/cluster-slot';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { OverrideKeys, RateLimitStore } from '../../lib/stores/store.interface';
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

/** An "instance": a service with its own engine on `store`, whose deny list reads `clock`; its poll is driven by hand. */
/** Redis `TIME` as ms. */
function redisMs([seconds, micros]: ReadonlyArray<string | number>): number {
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

function instance(store: RateLimitStore, clock: { now: number }, prefix = 'rl'): RateLimiterService & { engine: RateLimitEngine } {
  const engine = new RateLimitEngine(store, { clock: () => clock.now, prefix });
  return Object.assign(new RateLimiterService(engine, registry, { prefix }), { engine });
}

/** One poll of `limiter`'s instance, as its 500 ms timer sends it. */
const poll = (limiter: { engine: RateLimitEngine }) => limiter.engine.overrides.refresh();

/** Completed script runs, and the commands scripts ran that read keys, since the last RESETSTAT, over `nodes`. */
async function stats(nodes: Redis[]): Promise<Record<'scripts' | 'gets' | 'mgets' | 'hgetalls' | 'zranges', number>> {
  const counts = { scripts: 0, gets: 0, mgets: 0, hgetalls: 0, zranges: 0 };
  for (const node of nodes) {
    const info = await node.info('commandstats');
    for (const m of info.matchAll(/cmdstat_(?:evalsha|eval|fcall):calls=(\d+)/g)) counts.scripts += Number(m[1]);
    const calls = (name: string) => Number(new RegExp(`cmdstat_${name}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
    counts.gets += calls('get');
    counts.mgets += calls('mget');
    counts.hgetalls += calls('hgetall');
    counts.zranges += calls('zrange');
  }
  return counts;
}

/** The channel's keys under `prefix`, as the overrides' poll names them. */
function channelKeys(prefix: string): OverrideKeys {
  const tag = `${prefix}:{overrides}`;
  return {
    overrides: tag,
    version: `${tag}:v`,
    expiries: `${tag}:until`,
    instances: `${tag}:instances`,
    denies: {
      seq: `${tag}:denies:seq`,
      denies: `${tag}:denies`,
      log: `${tag}:denies:log`,
      ends: `${tag}:denies:until`,
      carryOver: `${tag}:denies:carry-over`,
    },
  };
}

let trackers = 0;
const tracker = () => `deny-${process.pid}-${++trackers}`;
let prefixes = 0;
/** A prefix of its own: its own deny channel and carry-over marker. */
const freshPrefix = () => `dn${process.pid}x${++prefixes}`;

/** Scenarios for a real store: `client` is the connection the stores use, `nodes` every master (for stats). */
function realStoreScenarios(name: string, setup: () => { client: Redis | Cluster; nodes: Redis[] }) {
  describe(name, () => {
    const resetStats = () => Promise.all(setup().nodes.map((n) => n.config('RESETSTAT')));

    it("keeps each deny in the channel (the overrides' hash tag) and in the 1.0 deny key, with end, reason and TTL; allow deletes both", async () => {
      const { client } = setup();
      const limiter = instance(createStore({ redis: client, prefix: 'rl' }, registry), { now: 0 });
      const key = tracker();
      const field = `rl:{by%3A${key}}:deny`;
      await limiter.deny(key, '1m', 'abuse: 50 failed logins');
      const value = await client.hget('rl:{overrides}:denies', field);
      expect(value).toMatch(/^\d{13}\|abuse: 50 failed logins$/);
      const until = Number(value!.split('|')[0]);
      expect(Number(await client.zscore('rl:{overrides}:denies:until', field))).toBe(until);
      const seq = Number(await client.get('rl:{overrides}:denies:seq'));
      expect(Number(await client.zscore('rl:{overrides}:denies:log', field))).toBe(seq);
      // The 1.0 key, which 1.0 instances read during a rolling upgrade: the same reason, and the same end as its
      // own server's clock makes it from the length left (a write later, a few ms at most), and a TTL.
      const [oldUntil, oldReason] = (await client.get(field))!.split('|');
      expect(oldReason).toBe('abuse: 50 failed logins');
      expect(Number(oldUntil) - until).toBeGreaterThanOrEqual(0);
      expect(Number(oldUntil) - until).toBeLessThan(1_000);
      const ttl = await client.pttl(field);
      expect(ttl).toBeGreaterThan(59_000);
      expect(ttl).toBeLessThanOrEqual(60_000);
      for (const channelKey of ['rl:{overrides}:denies', 'rl:{overrides}:denies:log', 'rl:{overrides}:denies:seq']) {
        const channelTtl = await client.pttl(channelKey);
        expect([channelKey, channelTtl > 0]).toEqual([channelKey, true]);
      }
      expect(await limiter.denied(key)).toEqual({ until: new Date(until), reason: 'abuse: 50 failed logins' });
      await limiter.allow(key);
      expect(await client.exists(field)).toBe(0);
      expect(await client.hexists('rl:{overrides}:denies', field)).toBe(0);
      expect(Number(await client.zscore('rl:{overrides}:denies:log', field))).toBe(seq + 1);
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
      ]) {
        expect([stored, await client.exists(`rl:{${stored}}:deny`)]).toEqual([stored, 1]);
        expect([stored, await client.hexists('rl:{overrides}:denies', `rl:{${stored}}:deny`)]).toEqual([stored, 1]);
      }
      expect(await limiter.denied(`by:${key}`)).toBeDefined();
      expect(await limiter.denied(`${key}-explicit`)).toBeDefined();
      expect(await limiter.denied('ip:203.0.113.7')).toBeDefined();
      expect(await limiter.denied('ip:2001:db8:0:0::/64')).toBeDefined();
      expect(await limiter.denied(`by:user:${key}`)).toBeUndefined();
      for (const key of ['ip:203.0.113.7', 'ip:2001:db8::1']) await limiter.allow(key);
    });

    it('a decision reads no deny key: one script call, a GET per policy for its lockout and its state; a denied one makes none', async () => {
      const { client, nodes } = setup();
      const limiter = instance(new RedisStore(client, registry.all(), false), { now: 0 });
      const key = tracker();
      await limiter.consumeAll([A, C], key);
      await resetStats();
      expect((await limiter.consumeAll([A, C], key)).allowed).toBe(true);
      // Per policy its lockout key (a fixed-window counter is charged with INCRBY, not read): nothing else.
      expect(await stats(nodes)).toMatchObject({ scripts: 1, gets: 2 });
      await limiter.deny(key, '1m');
      await resetStats();
      const denied = await limiter.consumeAll([A, C], key);
      expect(denied.decisions.map((d) => [d.allowed, d.reason])).toEqual([
        [false, 'blocked'],
        [false, 'blocked'],
      ]);
      expect(await stats(nodes)).toMatchObject({ scripts: 0, gets: 0 });
    });

    it('two instances: A rejects at once, B from its next poll, with the reply the store gave in 1.0; allow() likewise', async () => {
      const { client, nodes } = setup();
      const clockA = { now: 0 };
      const clockB = { now: 0 };
      const a = instance(createStore({ redis: client, prefix: 'rl' }, registry), clockA);
      const b = instance(createStore({ redis: client, prefix: 'rl' }, registry), clockB);
      await poll(b);
      const key = tracker();
      expect(await b.consume(A, key)).toMatchObject({ allowed: true, remaining: 4 });
      await a.deny(key, '1m', 'abuse');
      const onA = await a.consume(A, key);
      expect(onA).toMatchObject({ allowed: false, reason: 'blocked', remaining: 0 });
      expect(onA.retryAfterMs).toBeGreaterThan(59_000);
      expect(onA.retryAfterMs).toBeLessThanOrEqual(60_000);
      // B has not polled since: the store still decides for it (the deny reaches it within two polls, 1 s).
      expect(await b.consume(A, key)).toMatchObject({ allowed: true, remaining: 3 });

      await resetStats();
      await poll(b);
      // One poll script: the two versions in one MGET, then only the one tracker that changed.
      expect(await stats(nodes)).toMatchObject({ scripts: 1, mgets: 1, hgetalls: 0, zranges: 1 });
      const until = Number((await client.hget('rl:{overrides}:denies', `rl:{by%3A${key}}:deny`))!.split('|')[0]);
      await resetStats();
      const first = await b.consume(A, key);
      expect(first).toMatchObject({ allowed: false, reason: 'blocked', remaining: 0 });
      // On B's clock: the poll's TIME, 0 ms ago.
      const polledAt = until - first.retryAfterMs;
      expect(first).toMatchObject({ resetMs: until - polledAt, moreQuotaMs: until - polledAt });
      clockB.now += 300;
      expect(await b.peek(B, key)).toMatchObject({ allowed: false, reason: 'blocked', retryAfterMs: first.retryAfterMs - 300 });
      expect(await stats(nodes)).toMatchObject({ scripts: 0, gets: 0 });

      // A poll while nothing changed: one MGET, nothing else read.
      await resetStats();
      await poll(b);
      expect(await stats(nodes)).toMatchObject({ scripts: 1, mgets: 1, gets: 0, hgetalls: 0, zranges: 0 });

      await a.allow(key);
      expect(await a.consume(A, key)).toMatchObject({ allowed: true, remaining: 2 });
      expect(await b.consume(A, key)).toMatchObject({ allowed: false, reason: 'blocked' });
      await poll(b);
      expect(await b.consume(A, key)).toMatchObject({ allowed: true, remaining: 1 });
    });

    it('an instance that denied answers the tracker alone from the start; another tracker still goes to the store', async () => {
      const { client, nodes } = setup();
      const a = instance(createStore({ redis: client, prefix: 'rl' }, registry), { now: 0 });
      const key = tracker();
      const other = tracker();
      await a.consume(A, other);
      await a.deny(key, '1h');
      await resetStats();
      expect((await a.consume(A, key)).retryAfterMs).toBeGreaterThan(3_599_000);
      expect(await a.consume(A, other)).toMatchObject({ allowed: true, remaining: 3 });
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
      expect((await client.get(`rl:{by%3A${key}}:deny`))!.split('|')[1]).toBe('long');
      const dated = tracker();
      const at = new Date(Date.now() + 30_000);
      await limiter.deny(dated, at);
      // The store's clock is this machine's: within the time the calls took.
      expect(Math.abs((await limiter.denied(dated))!.until.getTime() - at.getTime())).toBeLessThan(1_000);
      const past = await limiter.deny(tracker(), new Date(Date.now() - 1_000)).catch((e: unknown) => e);
      expect(past).toBeInstanceOf(RateLimitConfigError);
      expect((past as Error).message).toMatch(/^deny: until: .* is not in the future \(the store's clock reads .*\)\.$/);
    });

    it('a deny that ended leaves the store at the next write, and every instance at its end', async () => {
      const { client } = setup();
      const prefix = freshPrefix();
      const a = instance(createStore({ redis: client, prefix }, registry), { now: 0 }, prefix);
      const clockB = { now: 0 };
      const b = instance(createStore({ redis: client, prefix }, registry), clockB, prefix);
      const short = tracker();
      // Long enough that B's poll sees it in force however busy the machine is; B's own clock is the test's.
      await a.deny(short, 2_000);
      await poll(b);
      expect(await b.consume(A, short)).toMatchObject({ allowed: false, reason: 'blocked' });
      clockB.now += 2_000;
      expect(await b.consume(A, short)).toMatchObject({ allowed: true, remaining: 4 });
      // Until the store's own clock has passed the end (read from it, not assumed).
      const field = `${prefix}:{by%3A${short}}:deny`;
      const end = Number(await client.zscore(`${prefix}:{overrides}:denies:until`, field));
      while (redisMs(await client.time()) <= end) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await client.hexists(`${prefix}:{overrides}:denies`, field)).toBe(1);
      await a.deny(tracker(), '1m');
      expect(await client.hexists(`${prefix}:{overrides}:denies`, field)).toBe(0);
      expect(await client.zscore(`${prefix}:{overrides}:denies:until`, field)).toBeNull();
      expect(await client.hlen(`${prefix}:{overrides}:denies`)).toBe(1);
    });

    it('an instance further behind than the log reads every deny again; 100,000 denies load, and one more is refused', async () => {
      const { client } = setup();
      const prefix = freshPrefix();
      const store = createStore({ redis: client, prefix }, registry);
      const a = instance(store, { now: 0 }, prefix);
      const b = instance(createStore({ redis: client, prefix }, registry), { now: 0 }, prefix);
      await poll(b);
      const until = Date.now() + 3_600_000;
      const keys = Array.from({ length: MAX_DENIES }, (_, i) => `${prefix}:{by%3Abulk-${i}}:deny`);
      // Written as a carry-over writes them: 5,000 a call, each call one change of the log.
      for (let i = 0; i < keys.length; i += 5_000) {
        const entries = keys.slice(i, i + 5_000).map((key) => [key, `${until}|bulk`] as const);
        const written = await store.writeDenies!(channelKeys(prefix), { op: 'import', since: '0', entries });
        expect(written.a).toBe(entries.length);
      }
      expect(await client.hlen(`${prefix}:{overrides}:denies`)).toBe(MAX_DENIES);
      // The log keeps the last 10,000 changes: B, which knew none of them, reads every deny.
      expect(await client.zcard(`${prefix}:{overrides}:denies:log`)).toBe(MAX_DENY_LOG + 1);
      await poll(b);
      for (const i of [0, 1, 49_999, 99_999]) {
        expect(await b.consume(A, `bulk-${i}`)).toMatchObject({ allowed: false, reason: 'blocked' });
      }
      expect(await b.denied('bulk-7')).toEqual({ until: new Date(until), reason: 'bulk' });
      const full = await a.deny(tracker(), '1m').catch((e: unknown) => e);
      expect(full).toBeInstanceOf(RateLimitConfigError);
      expect((full as Error).message).toBe(
        `deny: ${MAX_DENIES} trackers are denied already, the most kept (every instance holds them all); allow() some, or wait for some to end, before denying more.`,
      );
      // A tracker denied already may still be denied longer.
      await a.deny('bulk-3', '2h');
      await client.del(`${prefix}:{overrides}:denies`, `${prefix}:{overrides}:denies:until`, `${prefix}:{overrides}:denies:log`);
    }, 60_000);

    it('rolling upgrade: the deny keys 1.0 wrote are carried over and enforced; once no 1.0 instance is live, never again', async () => {
      const { client } = setup();
      const prefix = freshPrefix();
      const now = Date.now();
      // As 1.0's deny() wrote them (decide.lua's block mode): `<until>[|<reason>]`, with a TTL.
      const old = [tracker(), tracker(), tracker()];
      await client.set(`${prefix}:{by%3A${old[0]}}:deny`, `${now + 600_000}|from 1.0`, 'PX', 600_000);
      await client.set(`${prefix}:{by%3A${old[1]}}:deny`, `${now + 300_000}`, 'PX', 300_000);
      // A 1.0 instance is live (its heartbeat id is base64url alone).
      await client.zadd(`${prefix}:{overrides}:instances`, now, 'AbCdEfGhIjKl');
      // On a Cluster, one more 1.0 key on every master: the carry-over SCANs each.
      const masters = new Map<string, string>();
      for (let i = 0; 'slots' in client && masters.size < client.nodes('master').length && i < 1_000; i++) {
        const key = tracker();
        masters.set(client.slots[hashSlot(`${prefix}:{by%3A${key}}:deny`)][0], key);
      }
      for (const key of masters.values()) await client.set(`${prefix}:{by%3A${key}}:deny`, `${now + 600_000}|on each`, 'PX', 600_000);
      const b = instance(createStore({ redis: client, prefix }, registry), { now: 0 }, prefix);
      await b.engine.overrides.start();
      b.engine.overrides.stop();
      if ('slots' in client) expect(masters.size).toBe(3);
      for (const key of masters.values()) expect(await b.consume(A, key)).toMatchObject({ allowed: false, reason: 'blocked' });
      const carried = await b.consume(A, old[0]);
      expect(carried).toMatchObject({ allowed: false, reason: 'blocked' });
      expect(carried.retryAfterMs).toBeGreaterThan(590_000);
      expect(await b.denied(old[0])).toEqual({ until: new Date(now + 600_000), reason: 'from 1.0' });
      expect(await b.denied(old[1])).toEqual({ until: new Date(now + 300_000) });
      // While a 1.0 instance is live, the carry-over is due again 10 s later (its marker's TTL, cut short here).
      expect(await client.get(`${prefix}:{overrides}:denies:carry-over`)).toBe('running');
      await client.set(`${prefix}:{by%3A${old[2]}}:deny`, `${now + 600_000}|later`, 'PX', 600_000);
      await client.zrem(`${prefix}:{overrides}:instances`, 'AbCdEfGhIjKl');
      await client.del(`${prefix}:{overrides}:denies:carry-over`);
      expect(await b.engine.denials.carryOverNow()).toBe(true);
      await poll(b);
      expect(await b.denied(old[2])).toEqual({ until: new Date(now + 600_000), reason: 'later' });
      // Begun with no 1.0 instance live: done for good.
      expect(await client.get(`${prefix}:{overrides}:denies:carry-over`)).toBe('done');
      expect(await b.engine.denials.carryOverNow()).toBe(false);
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

  it("no decision reads the deny key: someone else's data there neither fails nor denies one, and is left alone", async () => {
    const limiter = instance(new RedisStore(client, registry.all(), false), { now: 0 });
    const key = tracker();
    await client.hset(`rl:{by%3A${key}}:deny`, 'field', 'value');
    expect(await limiter.consume(A, key)).toMatchObject({ allowed: true, remaining: 4 });
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
      // The store is gone: the deny held here still answers, and the fail-open fallback answers the others.
      clock.now += 1_000;
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
