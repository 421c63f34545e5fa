/**
 * The one-policy scripts as a Redis function library (`FCALL`), on a standalone redis-server through ioredis:
 * - the store loads the library on its first decision, and decisions of one policy then call its functions;
 * - a function answers exactly as its script does (every algorithm, consume and peek, on twin keys);
 * - a server that lost the library (`FUNCTION FLUSH`) answers "Function not found", nothing ran: that decision
 *   goes by script, charged once, and the library loads again;
 * - a server that refuses `FUNCTION LOAD` (an ACL without it) keeps every decision going by script.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { OWNED_CLIENT_DEFAULTS } from '../../lib/pipeline/create-store';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { luaScript, onePolicyCall } from '../../lib/stores/redis/redis-codec';
import { composeOnePolicyLibrary, composeOnePolicyScript } from '../../lib/stores/redis/redis-scripts';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RateLimitCall } from '../../lib/stores/store.interface';
import { startRedis, type RedisProcess } from '../support/redis-server';

const registry = new RateLimitAlgorithmRegistry();
const library = composeOnePolicyLibrary(registry.all());

let server: RedisProcess;
let admin: Redis;
const clients: Redis[] = [];

beforeAll(async () => {
  server = await startRedis();
  admin = new Redis(server.url);
});

afterAll(async () => {
  for (const client of clients) client.disconnect();
  admin?.disconnect();
  await server?.stop();
});

async function service(options: { username?: string; password?: string } = {}): Promise<RateLimiterService> {
  const client = new Redis({ ...OWNED_CLIENT_DEFAULTS, port: server.port, ...options });
  clients.push(client);
  await new Promise<void>((resolve) => client.once('ready', () => resolve()));
  return new RateLimiterService(new RateLimitEngine(new RedisStore(client, registry.all(), false)), registry, { prefix: 'fn' });
}

async function calls(command: string): Promise<number> {
  const match = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(await admin.info('commandstats'));
  return match ? Number(match[1]) : 0;
}

const policy: RateLimitPolicy = { algorithm: 'gcra', limit: 5, window: 60_000 };

test('the store loads the library on its first decision, then calls its functions', async () => {
  await admin.function('FLUSH');
  const limiter = await service();
  await limiter.consume(policy, 'first');
  const listed = (await admin.function('LIST')) as unknown[][];
  expect(listed.map((entry) => entry[1])).toEqual([library.name]);
  await admin.config('RESETSTAT');
  for (let i = 0; i < 4; i++) await limiter.consume(policy, 'first');
  expect([await calls('fcall'), await calls('evalsha')]).toEqual([4, 0]);
  expect((await limiter.peek(policy, 'first')).remaining).toBe(0);
});

test.each(registry.all().map((a) => [a.name, a] as const))('%s: a function answers as its script', async (_, algorithm) => {
  await admin.function('LOAD', 'REPLACE', library.code);
  const script = luaScript(composeOnePolicyScript(algorithm));
  const call = (tracker: string, cost: number, token: string): RateLimitCall =>
    ({
      algorithm,
      cost,
      params: { limit: 3, windowMs: 60_000, burst: 4 },
      blockForMs: 0,
      token,
      stateKey: `fn:{${tracker}}:s:${algorithm.keyTag}`,
      blockKey: `fn:{${tracker}}:b`,
      refundable: true, // the clock read, so both replies carry the same now
      fallback: 'fail-open',
    }) as RateLimitCall;
  const steps: Array<[number, string]> = [
    [1, 'c'],
    [2, 'c'],
    [1, 'p'],
    [5, 'c'],
    [1, 'c'],
    [1, 'c'],
  ];
  for (let attempt = 0; ; attempt++) {
    await admin.flushall();
    await admin.function('LOAD', 'REPLACE', library.code);
    const replies: Array<[unknown, unknown]> = [];
    for (const [i, [cost, mode]] of steps.entries()) {
      const a = onePolicyCall(call(`f-${algorithm.keyTag}`, cost, `lease ${i}`), mode);
      const b = onePolicyCall(call(`s-${algorithm.keyTag}`, cost, `lease ${i}`), mode);
      const results = (await admin
        .multi()
        .fcall(library.functions.get(algorithm.name)!, a.keys.length, ...a.keys, ...a.args)
        .eval(script.lua, b.keys.length, ...b.keys, ...b.args)
        .exec())!;
      replies.push([results[0][1], results[1][1]]);
    }
    // Both read the clock in one MULTI; a pair that straddled a millisecond starts the sequence over.
    if (replies.some(([a, b]) => (a as number[])[0] !== (b as number[])[0]) && attempt < 10) continue;
    for (const [a, b] of replies) expect(a).toEqual(b);
    break;
  }
});

test('a server that lost the library: that decision goes by script, charged once, and the library loads again', async () => {
  const limiter = await service();
  await limiter.consume(policy, 'lost');
  await admin.function('FLUSH');
  await admin.config('RESETSTAT');
  expect(await limiter.consume(policy, 'lost')).toMatchObject({ allowed: true, remaining: 3 });
  expect([await calls('fcall'), (await calls('evalsha')) + (await calls('eval'))]).toEqual([1, 1]);
  await limiter.consume(policy, 'lost');
  expect(((await admin.function('LIST')) as unknown[][]).map((entry) => entry[1])).toEqual([library.name]);
  expect((await limiter.peek(policy, 'lost')).remaining).toBe(2);
});

test('a server that refuses FUNCTION LOAD (an ACL without it): every decision by script', async () => {
  await admin.function('FLUSH');
  await admin.acl('SETUSER', 'nofunctions', 'on', '>secret', '~fn:*', '+@all', '-function', '-fcall');
  const limiter = await service({ username: 'nofunctions', password: 'secret' });
  await admin.config('RESETSTAT');
  for (let i = 0; i < 4; i++) expect((await limiter.consume(policy, 'acl')).allowed).toBe(true);
  expect((await limiter.consume(policy, 'acl')).allowed).toBe(true);
  expect((await limiter.consume(policy, 'acl')).allowed).toBe(false);
  expect(await calls('fcall')).toBe(0);
  expect(await admin.function('LIST')).toEqual([]);
});
