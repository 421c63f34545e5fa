/**
 * Someone else's data under our prefix: a decision that meets a key of the wrong Redis type fails with a
 * RateLimitStoreError naming that key (not a bare WRONGTYPE), on a real redis-server.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitStoreError } from '../../lib/errors/rate-limit-store.error';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import { startRedis, type RedisProcess } from '../support/redis-server';

const PREFIX = 'wt';

const CASES: Array<{ algorithm: RateLimitAlgorithmName; tag: string; type: 'string' | 'zset' }> = [
  { algorithm: 'fixed-window', tag: 'fw', type: 'string' },
  { algorithm: 'sliding-window', tag: 's', type: 'string' },
  { algorithm: 'sliding-log', tag: 'sl', type: 'zset' },
  { algorithm: 'token-bucket', tag: 't', type: 'string' },
  { algorithm: 'gcra', tag: 'g', type: 'string' },
  { algorithm: 'leaky-bucket', tag: 'l', type: 'string' },
  { algorithm: 'concurrency', tag: 'cc', type: 'zset' },
];

/** Ways to put foreign data under a key: a string, a list, a hash and a sorted set. */
const FOREIGN = {
  string: (redis: Redis, key: string) => redis.set(key, 'not ours'),
  list: (redis: Redis, key: string) => redis.rpush(key, 'a', 'b'),
  hash: (redis: Redis, key: string) => redis.hset(key, 'field', 'value'),
  zset: (redis: Redis, key: string) => redis.zadd(key, 1, 'member'),
} as const;

let server: RedisProcess;
let redis: Redis;
let limiter: RateLimiterService;

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
  const store = new RedisStore(redis, new RateLimitAlgorithmRegistry().all(), false);
  limiter = new RateLimiterService(new RateLimitEngine(store), new RateLimitAlgorithmRegistry(), { prefix: PREFIX });
});

afterAll(async () => {
  await redis?.quit();
  await server?.stop();
});

beforeEach(() => redis.flushall());

async function scanKeys(): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${PREFIX}:*`, 'COUNT', 1000);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys.sort();
}

/** The error a promise rejects with (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  if (!('error' in outcome)) throw new Error(`expected a rejection, got ${JSON.stringify(outcome.value)}`);
  return outcome.error as Error;
}

function expectNamesKey(error: Error, key: string, found: string, expected: string): void {
  expect(error).toBeInstanceOf(RateLimitStoreError);
  expect(error.message).toContain(`Redis key "${key}" holds a ${found}, but`);
  expect(error.message).toContain(`keeps a ${expected} there`);
  expect(String((error.cause as Error | undefined)?.message)).toContain('WRONGTYPE');
}

describe.each(CASES)('$algorithm meets foreign data under its state key', ({ algorithm, tag, type }) => {
  const policy: RateLimitPolicy = { algorithm, limit: 3, window: 10_000 };
  const stateKey = `${PREFIX}:{by%3Avictim}:svc:default:${tag}`;
  const foreignTypes = (['string', 'list', 'hash', 'zset'] as const).filter((t) => t !== type).map((t) => [t]);

  it('writes its state at the expected key (found by one consume and a SCAN)', async () => {
    await limiter.consume(policy, 'victim');
    expect(await scanKeys()).toStrictEqual([stateKey]);
    expect(await redis.type(stateKey)).toBe(type);
  });

  it.each(foreignTypes)('a %s there: consume and peek reject with a RateLimitStoreError naming the key', async (foreign) => {
    await limiter.consume(policy, 'victim'); // our state first, so the key is the one the policy really uses
    await redis.del(stateKey);
    await FOREIGN[foreign](redis, stateKey);

    expectNamesKey(await rejection(limiter.consume(policy, 'victim')), stateKey, foreign, type);
    expectNamesKey(await rejection(limiter.peek(policy, 'victim')), stateKey, foreign, type);
    expect(await redis.type(stateKey)).toBe(foreign); // the foreign data is left alone
    expect((await limiter.consume(policy, 'someone-else')).allowed).toBe(true); // other trackers are unaffected
  });

  if (type === 'string') {
    it.each([['not ours'], ['1:2:3:4:5'], ['-1'], ['']])(
      'a string it did not write there (%j): consume and peek reject with a RateLimitStoreError naming the key, alone and in a batch',
      async (value) => {
        await limiter.consume(policy, 'victim');
        await redis.set(stateKey, value);
        const message =
          `Redis key "${stateKey}" holds "${value}", which the rate limiter did not write: another ` +
          `application writes under this prefix. Give the rate limiter its own 'prefix' or delete the key.`;
        for (const decision of [limiter.consume(policy, 'victim'), limiter.peek(policy, 'victim')]) {
          const error = await rejection(decision);
          expect([error.constructor.name, error.message]).toEqual([RateLimitStoreError.name, message]);
        }
        // Decisions of one tick share a script call (decide.lua): the foreign value fails its own decision alone.
        const [other, victim] = await Promise.allSettled([limiter.consume(policy, 'a'), limiter.consume(policy, 'victim')]);
        expect(other.status).toBe('fulfilled');
        const error = (victim as PromiseRejectedResult).reason as Error;
        expect([error.constructor.name, error.message]).toEqual([RateLimitStoreError.name, message]);
        expect(await redis.get(stateKey)).toBe(value); // the foreign data is left alone
        expect((await limiter.consume(policy, 'someone-else')).allowed).toBe(true);
      },
    );
  }

  it('a hash under its lockout key: the error names the lockout key', async () => {
    const blocking: RateLimitPolicy = { ...policy, blockFor: 1_000 };
    const blockKey = `${PREFIX}:{by%3Avictim}:svc:default:b`;
    await FOREIGN.hash(redis, blockKey);
    expectNamesKey(await rejection(limiter.consume(blocking, 'victim')), blockKey, 'hash', 'string');
  });
});

it('consumeAll names the one key that is foreign, not its neighbours', async () => {
  const policies: RateLimitPolicy[] = [
    { algorithm: 'gcra', limit: 3, window: 10_000, name: 'g' },
    { algorithm: 'sliding-log', limit: 3, window: 10_000, name: 's' },
  ];
  expect((await limiter.consumeAll(policies, 'victim')).allowed).toBe(true);
  const keys = await scanKeys();
  expect(keys).toStrictEqual([`${PREFIX}:{by%3Avictim}:svc:g:g`, `${PREFIX}:{by%3Avictim}:svc:s:sl`]);
  await redis.del(keys[1]);
  await FOREIGN.string(redis, keys[1]);
  const error = await rejection(limiter.consumeAll(policies, 'victim'));
  expectNamesKey(error, keys[1], 'string', 'zset');
  expect(error.message).not.toContain(keys[0]);
  // All or nothing: the gcra state was not charged by the failed call.
  expect((await limiter.peek(policies[0], 'victim')).remaining).toBe(2);
});

it('in a batch (decisions of one tick share a call), only the decision that meets foreign data fails', async () => {
  // A day's window: the counts read back below must not cross a window's end (a 10 s one did, on a busy run).
  const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: 3, window: 86_400_000 };
  const foreignKey = `${PREFIX}:{by%3Avictim}:svc:default:fw`;
  await FOREIGN.list(redis, foreignKey);
  const outcomes = await Promise.allSettled(['a', 'victim', 'b', 'a'].map((tracker) => limiter.consume(policy, tracker)));
  expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
  expectNamesKey((outcomes[1] as PromiseRejectedResult).reason as Error, foreignKey, 'list', 'string');
  // The others were each charged once, in order: 'a' twice, 'b' once.
  expect(outcomes.map((o) => (o.status === 'fulfilled' ? o.value.remaining : undefined))).toEqual([2, undefined, 2, 1]);
  expect((await limiter.peek(policy, 'a')).remaining).toBe(1);
  expect((await limiter.peek(policy, 'b')).remaining).toBe(2);
});
