/**
 * The Redis contract "each decision is one round trip: one EVALSHA, or one FCALL where the library has loaded a
 * function library" (shared/API.md), counted by the server: after `CONFIG RESETSTAT`, N decisions give
 * `cmdstat_evalsha` (or, for a decision of one policy on a standalone server through ioredis, `cmdstat_fcall`)
 * `calls=N`, no EVAL / SCRIPT / MULTI, and
 * at most one `TIME` per decision (time comes from the server, read once; a fixed-window decision reads it
 * only when its counter's TTL does not tell the rest of its window). Redis also counts the commands a
 * script runs inside (HMGET, ZADD, …) in INFO commandstats, so MONITOR attributes every command to its
 * sender: everything the application's connection sent is one EVALSHA or FCALL per decision, the rest ran inside
 * Lua. ioredis sends EVAL the first time a script is used on a connection, and the store loads its function
 * library on its first decision: every script is warmed up before the stats are reset.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine, type PolicyRequest } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { OWNED_CLIENT_DEFAULTS } from '../../lib/pipeline/create-store';
import { MAX_BATCH, RedisStore } from '../../lib/stores/redis/redis.store';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { startRedis, type RedisProcess } from '../support/redis-server';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;

const registry = new RateLimitAlgorithmRegistry();
let redis: RedisProcess;
let admin: Redis;
let client: Redis;
let store: RedisStore;
let service: RateLimiterService;
let clientAddr: string;

const single = (algorithm: RateLimitAlgorithmName): RateLimitPolicy => ({ algorithm, limit: 3, window: 60_000 });
/** Mixed-algorithm groups: each is one call covering 2-3 policies. */
const GROUPS: RateLimitPolicy[][] = [
  [
    { algorithm: 'gcra', limit: 5, window: 1000, name: 'a' },
    { algorithm: 'sliding-log', limit: 2, window: 1000, name: 'b' },
  ],
  [
    { algorithm: 'fixed-window', limit: 5, window: 1000, name: 'a' },
    { algorithm: 'token-bucket', limit: 5, window: 1000, name: 'b' },
    { algorithm: 'concurrency', limit: 5, window: 1000, name: 'c' },
  ],
  [
    { algorithm: 'sliding-window', limit: 5, window: 1000, name: 'a' },
    { algorithm: 'leaky-bucket', limit: 5, window: 1000, name: 'b', delay: false },
  ],
];

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis({ port: redis.port });
  // The options the library uses for a client it creates itself (auto-pipelining, no offline queue).
  client = new Redis({ ...OWNED_CLIENT_DEFAULTS, port: redis.port });
  await new Promise<void>((resolve) => client.once('ready', () => resolve()));
  clientAddr = /addr=(\S+)/.exec(String(await client.client('INFO')))![1];
  store = new RedisStore(client, registry.all(), false);
  service = new RateLimiterService(new RateLimitEngine(store), registry, { prefix: 'rl' });
  // Warm-up: every script once on this connection (ioredis EVALs a script the first time).
  for (const algorithm of ALGORITHMS) await service.peek(single(algorithm), 'warmup');
  // One command per policy count (see RedisStore): warm each count used below, decisions and refunds.
  for (const group of GROUPS) await service.consumeAll(group, 'warmup');
  for (const group of GROUPS) await store.refund(new RateLimitEngine(store).calls('rl:{warmup}:', requestsOf(group)));
  // … and the batch command, used when decisions share a tick.
  await Promise.all([service.peek(single('gcra'), 'warmup'), service.peek(single('gcra'), 'warmup')]);
}, 30_000);

/** The engine's requests for a group of policies, each of cost 1. */
function requestsOf(group: RateLimitPolicy[]): PolicyRequest[] {
  return group.map((policy) => {
    const compiled = compilePolicy(policy, registry, 'test', 'svc');
    return { compiled, params: compiled.staticParams!, cost: 1 };
  });
}

const onTeardown: Array<() => void> = [];

afterAll(async () => {
  for (const teardown of onTeardown) teardown();
  client?.disconnect();
  admin?.disconnect();
  await redis?.stop();
});

/** `INFO commandstats` as { command: calls }. */
async function commandStats(): Promise<Record<string, number>> {
  const info = await admin.info('commandstats');
  const stats: Record<string, number> = {};
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) stats[match[1]] = Number(match[2]);
  return stats;
}

/** Runs `work` between a stats reset and a MONITOR capture; returns the stats and what the client sent. */
async function measure(
  work: () => Promise<void>,
  from = clientAddr,
): Promise<{ stats: Record<string, number>; sent: string[]; fromLua: number }> {
  const monitor = await admin.monitor();
  const sent: string[] = [];
  let fromLua = 0;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (source === from) sent.push(String(args[0]).toLowerCase());
    else if (source === 'lua') fromLua++;
  });
  await admin.config('RESETSTAT');
  await work();
  const stats = await commandStats();
  // MONITOR lines arrive asynchronously: wait for the last of ours to land.
  await admin.ping();
  await new Promise((resolve) => setTimeout(resolve, 50));
  monitor.disconnect();
  return { stats, sent, fromLua };
}

/** The stats without the admin connection's own commands (INFO, CONFIG, MONITOR, PING). */
function dataCommands(stats: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(stats).filter(([name]) => !/^(info|config\|.*|monitor|ping)$/.test(name)));
}

describe('each decision is exactly one EVALSHA or FCALL', () => {
  test('single-policy decisions of every algorithm (consume, peek), one at a time', async () => {
    let n = 0;
    const { stats, sent, fromLua } = await measure(async () => {
      for (const algorithm of ALGORITHMS) {
        for (let i = 0; i < 4; i++) await service.consume(single(algorithm), `single-${algorithm}`);
        await service.peek(single(algorithm), `single-${algorithm}`);
        n += 5;
      }
    });
    expect(n).toBe(35);
    // A decision of one policy calls its function of the library the store loaded (warm-up), the others EVALSHA.
    expect(stats.fcall).toBe(n);
    expect(stats.evalsha).toBeUndefined();
    // One TIME per decision, but for fixed-window (a window of 60 s): its counter's TTL is the rest of its window,
    // so it reads the clock on the window's first hit and for a peek, not for its 2nd, 3rd and 4th consume.
    expect(stats.time).toBe(n - 3);
    // No script loading, no transactions: the counts of those commands are absent.
    const data = dataCommands(stats);
    expect(['eval', 'script|load', 'script|exists', 'multi', 'exec', 'watch'].filter((name) => name in data)).toEqual([]);
    // Everything the application's connection sent: one FCALL per decision, nothing else.
    expect(sent).toEqual(new Array(n).fill('fcall'));
    expect(fromLua).toBeGreaterThan(n);
  });

  test('decisions made in the same tick share one EVALSHA (and one TIME) on a standalone Redis', async () => {
    const { stats, sent } = await measure(async () => {
      const decisions = await Promise.all(Array.from({ length: 20 }, (_, i) => service.consume(single('gcra'), `tick-${i % 2}`)));
      // Decided one after the other inside the script: each tracker's limit of 3 holds exactly.
      expect(decisions.filter((d) => d.allowed)).toHaveLength(6);
    });
    expect(stats.evalsha).toBe(1);
    expect(stats.time).toBe(1);
    expect(sent).toEqual(['evalsha']);
  });

  test(`a tick with more than ${MAX_BATCH} decisions is split into calls of at most ${MAX_BATCH}`, async () => {
    const calls = Math.ceil(150 / MAX_BATCH);
    expect(calls).toBeGreaterThan(1);
    const { stats, sent } = await measure(async () => {
      const decisions = await Promise.all(Array.from({ length: 150 }, (_, i) => service.consume(single('sliding-log'), `split-${i % 10}`)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(30);
    });
    expect(stats.evalsha).toBe(calls);
    expect(sent).toEqual(new Array(calls).fill('evalsha'));
  });

  test('a full batch is written at once, before the tick ends; the rest leaves when the tick ends', async () => {
    const written: number[] = [];
    const send = client.sendCommand.bind(client);
    const spy = jest.spyOn(client, 'sendCommand').mockImplementation((command, stream) => {
      // The key count follows the SHA: two keys per single-policy decision (state, lockout; no deny key).
      written.push(Number(command.args[1]) / 2);
      return send(command, stream);
    });
    try {
      const pending = Array.from({ length: MAX_BATCH + 3 }, (_, i) => service.consume(single('gcra'), `eager-${i}`));
      // Every microtask has run, no macrotask has: the turn has not ended yet.
      await new Promise<void>((resolve) => process.nextTick(resolve));
      expect(written).toEqual([MAX_BATCH]);
      const decisions = await Promise.all(pending);
      expect(written).toEqual([MAX_BATCH, 3]);
      expect(decisions.every((d) => d.allowed && d.remaining === 2)).toBe(true);
    } finally {
      spy.mockRestore();
    }
  });

  test(`a batch holds at most ${MAX_BATCH} policies: a tick of ten 8-policy requests leaves in calls of 4, 4 and 2`, async () => {
    const eight: RateLimitPolicy[] = Array.from({ length: 8 }, (_, i) => ({
      algorithm: 'fixed-window',
      limit: 5,
      window: 60_000,
      name: `p${i}`,
    }));
    const written: number[] = [];
    const send = client.sendCommand.bind(client);
    const spy = jest.spyOn(client, 'sendCommand').mockImplementation((command, stream) => {
      // An 8-policy decision has 16 keys (state and lockout per policy; no deny key).
      written.push(Number(command.args[1]) / 16);
      return send(command, stream);
    });
    try {
      const decisions = await Promise.all(Array.from({ length: 10 }, (_, i) => service.consumeAll(eight, `eight-${i}`)));
      expect(written).toEqual([4, 4, 2]);
      expect(decisions.every((d) => d.allowed)).toBe(true);
    } finally {
      spy.mockRestore();
    }
  });

  test('a lone decision is written when its turn ends (not held for an auto-pipeline), with its lean script', async () => {
    const written: Array<{ name: string; keys: number }> = [];
    const send = client.sendCommand.bind(client);
    const spy = jest.spyOn(client, 'sendCommand').mockImplementation((command, stream) => {
      written.push({ name: command.name, keys: Number(command.args[1]) });
      return send(command, stream);
    });
    try {
      const pending = service.consume(single('token-bucket'), 'lone');
      // Queued after the store's own end-of-turn flush: runs right after it, before any later turn.
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(written).toEqual([{ name: 'fcall', keys: 2 }]);
      expect((await pending).remaining).toBe(2);
    } finally {
      spy.mockRestore();
    }
  });

  test('with batching off, concurrent decisions are one auto-pipelined FCALL each', async () => {
    // Its own connection: commands defined again on the shared client would be new scripts to ioredis (EVAL first).
    const own = new Redis({ ...OWNED_CLIENT_DEFAULTS, port: redis.port });
    onTeardown.push(() => own.disconnect());
    await new Promise<void>((resolve) => own.once('ready', () => resolve()));
    const unbatched = new RateLimiterService(new RateLimitEngine(new RedisStore(own, registry.all(), false, false)), registry, {
      prefix: 'rl',
    });
    await unbatched.peek(single('gcra'), 'warmup');
    const ownAddr = /addr=(\S+)/.exec(String(await own.client('INFO')))![1];
    const { stats, sent } = await measure(async () => {
      await Promise.all(Array.from({ length: 20 }, () => unbatched.consume(single('gcra'), 'burst')));
    }, ownAddr);
    // The warm-up loaded the library (its FUNCTION LOAD went ahead of the warm-up's own EVALSHA).
    expect(stats.fcall).toBe(20);
    expect(stats.time).toBe(20);
    expect(sent).toEqual(new Array(20).fill('fcall'));
  });

  test('multi-policy decisions (2-3 policies of mixed algorithms in one call), and refunds', async () => {
    let n = 0;
    const { stats, sent } = await measure(async () => {
      for (let round = 0; round < 4; round++) {
        for (const [i, group] of GROUPS.entries()) {
          await service.consumeAll(group, `multi-${i}`);
          n++;
        }
      }
      const engine = new RateLimitEngine(store);
      const { calls } = await engine.decide('rl:{refund}:', requestsOf(GROUPS[1]), 'consume');
      await engine.refund(calls);
      n += 2;
    });
    expect(n).toBe(14);
    expect(stats.evalsha).toBe(n);
    expect(['eval', 'script|load', 'script|exists', 'multi', 'exec', 'watch'].filter((name) => name in dataCommands(stats))).toEqual([]);
    // Decisions read the server clock once; a refund does too.
    expect(stats.time).toBe(n);
    expect(sent).toEqual(new Array(n).fill('evalsha'));
  });
});
