/**
 * fixed-window's counter (1.1): an integer that expires when its window ends, charged with one INCRBY, its
 * lockouts marked in it (so a decision reads the lockout key only on a window's first hit or under the mark),
 * and the server's clock read only on a window's first hit. On a real redis-server, two instances (two stores
 * on one Redis, as two processes would be), exact counts:
 * - `block()` and a `blockFor` lockout are enforced by the other instance on its next decision, mid-window;
 * - a lockout that ends mid-window leaves the window's count as it was (no fresh quota);
 * - `unblock()` lifts the lockout and keeps the count;
 * - a rolling upgrade from 1.0 (CHANGELOG "Upgrading from 1.0"): a lockout 1.0 wrote is enforced; 1.0's count
 *   (key tag `f`, "<window id>:<count>") is not carried over, so while both versions serve a window may admit
 *   up to its limit once on each version's key.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { sleep } from '../e2e/harness';
import { startRedis, type RedisProcess } from '../support/redis-server';

const registry = new RateLimitAlgorithmRegistry();
const PREFIX = 'fwc';
/** A day's window: no test here crosses a window's end. */
const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 5, window: 86_400_000, name: 'p' };

let server: RedisProcess;
let clients: Redis[];
let a: RateLimiterService;
let b: RateLimiterService;
let tracker = 0;

beforeAll(async () => {
  server = await startRedis();
  clients = [new Redis(server.url), new Redis(server.url), new Redis(server.url)];
  const instance = (client: Redis) =>
    new RateLimiterService(new RateLimitEngine(new RedisStore(client, registry.all(), false)), registry, { prefix: PREFIX });
  [a, b] = [instance(clients[0]), instance(clients[1])];
});

afterAll(async () => {
  for (const client of clients ?? []) client.disconnect();
  await server?.stop();
});

const admin = () => clients[2];
const key = () => `t${++tracker}`;
const stateKey = (k: string) => `${PREFIX}:{by%3A${k}}:svc:p:fw`;
const blockKey = (k: string) => `${PREFIX}:{by%3A${k}}:svc:p:b`;
const remaining = async (limiter: RateLimiterService, k: string) => (await limiter.peek(policy, k)).remaining;

test('the counter is the window count, expiring at the window end', async () => {
  const k = key();
  for (let i = 0; i < 3; i++) await a.consume(policy, k);
  expect(await admin().get(stateKey(k))).toBe('3');
  const pttl = await admin().pttl(stateKey(k));
  const now = Number((await admin().time())[0]) * 1000;
  // The window is the UTC day: the key lives until its end, no longer.
  expect(pttl).toBeLessThanOrEqual(86_400_000 - (now % 86_400_000) + 1_000);
  expect(pttl).toBeGreaterThan(86_400_000 - (now % 86_400_000) - 5_000);
});

test('block() mid-window: the other instance is blocked on its next decision; unblock() keeps the count', async () => {
  const k = key();
  for (let i = 0; i < 2; i++) expect((await b.consume(policy, k)).allowed).toBe(true);
  await a.block(policy, k, '1h');
  expect(await b.consume(policy, k)).toMatchObject({ allowed: false, reason: 'blocked' });
  expect(await a.consume(policy, k)).toMatchObject({ allowed: false, reason: 'blocked' });
  await a.unblock(policy, k);
  // Two units were counted before the lockout; the blocked calls charged nothing.
  expect(await b.consume(policy, k)).toMatchObject({ allowed: true, remaining: 2 });
  expect(await admin().get(stateKey(k))).toBe('3');
});

test('a blockFor lockout ending mid-window leaves the window spent: limited, not a fresh quota', async () => {
  const k = key();
  const blocking: RateLimitPolicy = { ...policy, blockFor: 300 };
  for (let i = 0; i < 5; i++) expect((await a.consume(blocking, k)).allowed).toBe(true);
  // The lockout is 300 ms; more quota comes at the window's end, which the retry after says.
  const rejected = await a.consume(blocking, k);
  expect(rejected).toMatchObject({ allowed: false, reason: 'blocked' });
  expect(rejected.retryAfterMs).toBeGreaterThan(300);
  expect(await admin().pttl(blockKey(k))).toBeLessThanOrEqual(300);
  expect(await b.consume(blocking, k)).toMatchObject({ allowed: false, reason: 'blocked' });
  // Until the lockout key has expired on the server (its PTTL says when), however busy the machine is.
  while ((await admin().pttl(blockKey(k))) > 0) await sleep(50);
  expect(await b.consume(blocking, k)).toMatchObject({ allowed: false, reason: 'blocked' }); // a new lockout: still over the limit
  expect(await remaining(a, k)).toBe(0);
});

test('rolling upgrade from 1.0: a lockout 1.0 wrote is enforced; 1.0 counts under its own key', async () => {
  const k = key();
  const [seconds] = await admin().time();
  const now = Number(seconds) * 1000;
  // 1.0's values: the lockout key holds its end (server ms); the state key "<window id>:<count>", tag `f`.
  await admin().set(blockKey(k), String(now + 3_600_000), 'PX', 3_600_000);
  await admin().set(`${PREFIX}:{by%3A${k}}:svc:p:f`, `${Math.floor(now / 86_400_000)}:5`, 'PX', 3_600_000);
  expect(await a.consume(policy, k)).toMatchObject({ allowed: false, reason: 'blocked' });
  await admin().del(blockKey(k));
  // 1.0's spent window is not read: 1.1's counter starts at 0 (the mixed fleet's doubled window, CHANGELOG).
  expect(await a.consume(policy, k)).toMatchObject({ allowed: true, remaining: 4 });
  expect(await admin().get(`${PREFIX}:{by%3A${k}}:svc:p:f`)).toBe(`${Math.floor(now / 86_400_000)}:5`);
});
