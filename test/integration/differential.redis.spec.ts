/**
 * Differential proof: every algorithm's Lua fragment (run by RedisStore on a real server, time from Redis
 * `TIME`) and its TypeScript twin (run by MemoryStore) give identical verdicts, field by field, for the same
 * sequence of (time, cost, mode) calls.
 *
 * How: each step of a random trace sleeps `gapMs` (real time), runs on Redis, then is replayed on a
 * MemoryStore whose clock returns exactly the `nowMs` the Redis script reported. Single-policy traces for
 * each of the seven algorithms, and multi-policy traces (2-3 policies of mixed algorithms in one call,
 * all-or-nothing). Some steps hold units back (a policy `reserve`'s `hold`, 1 to 3 units of a policy) so the check
 * with cost + hold, the charge of cost alone and the Reserved verdict are compared too. A consume of one policy is
 * replayed twice: through the store's full decision, which the
 * guard takes, and through its plain path (`consumePlain`), which `RateLimiterService.consume` takes; both
 * must give Redis's verdict.
 *
 * Refunds: `store.refund` does not report the time its script used. We bracket it with a `TIME` sent just
 * before and one sent just after on the same connection (Redis runs one connection's commands in order, so
 * `before <= script time <= after`, in ms). Usually both fall in the same millisecond and that is the
 * refund's exact time. When they do not, every millisecond of the bracket is a possible time: the replay
 * keeps one "possible world" per choice (each replayed from scratch on a fresh MemoryStore) and drops the
 * worlds that disagree with a later Redis verdict. A step fails only when no possible world gives Redis's
 * verdicts. A refund re-uses the calls of an earlier admitted consume of the trace (as the engine does for
 * count-only outcomes and lease release), or fresh calls when there was none.
 *
 * Every trace runs once per client library (ioredis, node-redis, Valkey GLIDE): each sends the TIME bracket on
 * the connection that carries the refund, and replies the same numbers.
 */
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitAlgorithmName, RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import type { LruMap } from '../../lib/shared/lru-map';
import { RedisStore } from '../../lib/stores/redis/redis.store';
import type { RedisClient } from '../../lib/interfaces/client-types';
import type { KeySlot, RateLimitCall, StoreDecision } from '../../lib/stores/store.interface';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';
import { REDIS_CLIENTS, type RedisClientKind } from '../support/redis-clients';
import { startRedis, type RedisProcess } from '../support/redis-server';

const ALGORITHMS = RATE_LIMIT_ALGORITHMS;
const BUCKETS = new Set<RateLimitAlgorithmName>(['token-bucket', 'gcra', 'leaky-bucket']);
const RUNS = 25;
const STEPS = 20;

interface PolicySpec {
  algorithm: RateLimitAlgorithmName;
  limit: number;
  windowMs: number;
  burst: number;
}

type Op = 'consume' | 'peek' | 'refund';

interface Step {
  gapMs: number;
  op: Op;
  /** One cost per policy (the first n are used). */
  costs: number[];
  /** One hold per policy (the units a reserve keeps back; mostly 0). */
  holds: number[];
  /** Which earlier consume a refund gives back. */
  pick: number;
}

const registry = new RateLimitAlgorithmRegistry();

/** One client library's store on the file's server, and its client (which also sends the TIME bracket). */
interface Env {
  kind: RedisClientKind;
  client: RedisClient;
  store: RedisStore;
}

let redis: Promise<RedisProcess> | undefined;
const envs = new Map<string, Promise<Env>>();

/** Starts one server for the whole file, and one store per client library, whichever concurrent test asks first. */
function env(kind: RedisClientKind): Promise<Env> {
  redis ??= startRedis();
  let ready = envs.get(kind.name);
  if (!ready) {
    ready = (async () => {
      // ioredis's auto-pipelining (node-redis and GLIDE pipeline on their own) sends the commands of one tick in
      // one write, so the TIME bracket around a refund is tight.
      const client = await kind.connect((await redis!).port);
      const store = new RedisStore(client, registry.all(), false);
      // Load every script on the connection first (the first call of each is a slower EVAL).
      const engine = new RateLimitEngine(store);
      const warm = ALGORITHMS.map((algorithm, i) =>
        compilePolicy({ algorithm, limit: 1, window: 100, name: `w${i}` }, registry, 'test', 'svc'),
      );
      const requests = warm.map((compiled) => ({ compiled, params: compiled.staticParams!, cost: 0 }));
      for (const request of requests) await store.decide(engine.calls('warmup:', [request]), 'peek');
      await store.decide(engine.calls('warmup:', requests.slice(0, 2)), 'peek');
      return { kind, client, store };
    })();
    envs.set(kind.name, ready);
  }
  return ready;
}

afterAll(async () => {
  for (const ready of envs.values()) {
    const { kind, client, store } = await ready;
    await store.close();
    await kind.close(client);
  }
  await (await redis)?.stop();
});

/** Redis `TIME` on the client's connection (every library has a `time()`). */
function serverTime(client: RedisClient): Promise<ReadonlyArray<string | number>> {
  return (client as unknown as { time(): Promise<ReadonlyArray<string | number>> }).time();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Redis `TIME` ([seconds, microseconds], as strings on the wire) in whole ms, as decide.lua computes it. */
const ms = ([sec, usec]: ReadonlyArray<string | number>) => Number(sec) * 1000 + Math.floor(Number(usec) / 1000);

function policyArb(algorithm: RateLimitAlgorithmName): fc.Arbitrary<PolicySpec> {
  return fc.record({
    algorithm: fc.constant(algorithm),
    limit: fc.integer({ min: 1, max: 8 }),
    windowMs: fc.integer({ min: 50, max: 400 }),
    burst: fc.integer({ min: 1, max: 10 }),
  });
}

const stepArb: fc.Arbitrary<Step> = fc.record({
  gapMs: fc.oneof(
    { arbitrary: fc.constant(0), weight: 2 },
    { arbitrary: fc.integer({ min: 1, max: 5 }), weight: 2 },
    { arbitrary: fc.integer({ min: 0, max: 60 }), weight: 3 },
  ),
  op: fc.oneof(
    { arbitrary: fc.constant<Op>('consume'), weight: 5 },
    { arbitrary: fc.constant<Op>('peek'), weight: 2 },
    { arbitrary: fc.constant<Op>('refund'), weight: 2 },
  ),
  costs: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 3, maxLength: 3 }),
  holds: fc.array(fc.oneof({ arbitrary: fc.constant(0), weight: 3 }, { arbitrary: fc.integer({ min: 1, max: 3 }), weight: 2 }), {
    minLength: 3,
    maxLength: 3,
  }),
  pick: fc.nat(),
});

const traceArb = fc.array(stepArb, { minLength: STEPS, maxLength: STEPS });

function toPolicy(spec: PolicySpec, i: number): RateLimitPolicy {
  return {
    algorithm: spec.algorithm,
    limit: spec.limit,
    window: spec.windowMs,
    name: `p${i}`,
    ...(BUCKETS.has(spec.algorithm) ? { burst: spec.burst } : {}),
  };
}

/** One store operation of a trace, with the server times it may have run at. */
interface TraceEvent {
  kind: 'consume' | 'peek' | 'refund';
  calls: RateLimitCall[];
  times: number[];
}

/**
 * Replays `events` on a fresh memory store, event k at `chosen[k]`; with `plain`, a consume of one call goes
 * through the store's plain path when it takes it. Returns the last decision and a fingerprint of the store's
 * live entries (value and expiry), so that worlds in the same state merge.
 */
async function replay(
  events: readonly TraceEvent[],
  chosen: readonly number[],
  plain = false,
): Promise<{ last?: StoreDecision; state: string }> {
  let clock = 0;
  const memory = new MemoryStore({ clock: () => clock });
  const slots = new Map<string, KeySlot>();
  let last: StoreDecision | undefined;
  for (let k = 0; k < events.length; k++) {
    clock = chosen[k];
    const event = events[k];
    if (event.kind === 'refund') await memory.refund(event.calls);
    else if (plain && event.kind === 'consume' && event.calls.length === 1) {
      last = consumePlain(memory, slots, event.calls[0], clock) ?? (await memory.decide(event.calls, event.kind));
    } else last = await memory.decide(event.calls, event.kind);
  }
  // Test-only peek at the private map: the state is all that matters for what the store decides next.
  const { entries } = (memory as unknown as { keyspace: { entries: LruMap<unknown> } }).keyspace;
  const fingerprint = [...entries]
    .filter(([key]) => clock <= entries.getNode(key)!.expiresAt)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([key, value]) => [key, value, entries.getNode(key)!.expiresAt]);
  return { last, state: JSON.stringify(fingerprint) };
}

/**
 * `call` consumed through the memory store's plain path, as `RateLimitEngine.consumePlain` asks it (a policy
 * with no lockout or lease; the tracker's slot kept between calls), as a store decision; `undefined` when
 * the path declines it.
 */
function consumePlain(memory: MemoryStore, slots: Map<string, KeySlot>, call: RateLimitCall, now: number): StoreDecision | undefined {
  // As RateLimitEngine.takesPlain: no lockout, no lease, no reserve.
  if (call.blockForMs > 0 || call.algorithm.name === 'concurrency' || call.hold) return undefined;
  let slot = slots.get(call.stateKey);
  if (slot === undefined) slots.set(call.stateKey, (slot = { key: call.stateKey, entry: undefined }));
  const v = memory.consumePlain(slot, call.algorithm, call.params, call.cost);
  return v === undefined ? undefined : { nowMs: now, allowed: v.allowed, verdicts: [{ ...v }] };
}

/** Keeps one world per distinct store state. */
async function merge(events: readonly TraceEvent[], worlds: number[][]): Promise<number[][]> {
  const byState = new Map<string, number[]>();
  for (const world of worlds) {
    const { state } = await replay(events, world);
    if (!byState.has(state)) byState.set(state, world);
  }
  return [...byState.values()];
}

/** Field-by-field difference between two decisions, or undefined when identical. */
function difference(specs: PolicySpec[], fromRedis: StoreDecision, fromMemory: StoreDecision): string | undefined {
  if (fromMemory.nowMs !== fromRedis.nowMs) return 'nowMs';
  if (fromMemory.allowed !== fromRedis.allowed) return 'allowed';
  for (let j = 0; j < fromRedis.verdicts.length; j++) {
    for (const field of ['allowed', 'remaining', 'resetMs', 'moreQuotaMs', 'retryAfterMs', 'delayMs', 'reason'] as const) {
      if (fromRedis.verdicts[j][field] !== fromMemory.verdicts[j][field]) return `policy ${j} (${specs[j].algorithm}) ${field}`;
    }
  }
  return undefined;
}

const MAX_WORLDS = 64;

/** Runs `steps` on Redis and checks each decision against the memory twin at the Redis time; throws on a difference. */
async function runTrace(kind: RedisClientKind, specs: PolicySpec[], steps: Step[]): Promise<{ ambiguous: number }> {
  const { client, store: redisStore } = await env(kind);
  const engine = new RateLimitEngine(redisStore);
  const compiled = specs.map((spec, i) => compilePolicy(toPolicy(spec, i), registry, 'test', 'svc'));
  const prefix = trackerKeyPrefix('rl', `diff-${randomUUID()}`);
  const events: TraceEvent[] = [];
  /** Possible time choices for the events so far (only refunds can have more than one). */
  let worlds: number[][] = [[]];
  let ambiguous = 0;
  const consumed: RateLimitCall[][] = [];
  const callsOf = (step: Step) =>
    engine
      .calls(
        prefix,
        compiled.map((c, j) => ({ compiled: c, params: c.staticParams!, cost: step.costs[j] })),
      )
      .map((call, j) => ({ ...call, hold: step.holds[j] }));

  for (const step of steps) {
    if (step.gapMs > 0) await sleep(step.gapMs);
    if (step.op === 'refund') {
      const calls = consumed.length > 0 ? consumed[step.pick % consumed.length] : callsOf(step);
      const before = serverTime(client);
      const refunded = redisStore.refund(calls);
      const after = serverTime(client);
      const [t1, , t2] = await Promise.all([before, refunded, after]);
      const times: number[] = [];
      for (let t = ms(t1); t <= ms(t2); t++) times.push(t);
      if (times.length > 1) ambiguous++;
      events.push({ kind: 'refund', calls, times });
      worlds = worlds.flatMap((w) => times.map((t) => [...w, t]));
      if (times.length > 1) worlds = await merge(events, worlds);
      if (worlds.length > MAX_WORLDS)
        throw new Error(`too many possible refund times (${worlds.length}); the machine is too slow for this test`);
      continue;
    }
    const calls = callsOf(step);
    const fromRedis = await redisStore.decide(calls, step.op);
    events.push({ kind: step.op, calls, times: [fromRedis.nowMs] });
    worlds = worlds.map((w) => [...w, fromRedis.nowMs]);
    const survivors: number[][] = [];
    let firstMismatch: { diff: string; fromMemory: StoreDecision } | undefined;
    for (const world of worlds) {
      let fromMemory = (await replay(events, world)).last!;
      let diff = difference(specs, fromRedis, fromMemory);
      if (diff === undefined && step.op === 'consume' && calls.length === 1) {
        fromMemory = (await replay(events, world, true)).last!;
        diff = difference(specs, fromRedis, fromMemory);
        if (diff !== undefined) diff += ', through the plain path';
      }
      if (diff === undefined) survivors.push(world);
      else firstMismatch ??= { diff, fromMemory };
    }
    if (survivors.length === 0) {
      const history = events.map(
        (e) => `${e.kind} costs ${e.calls.map((c) => (c.hold ? `${c.cost}+${c.hold}` : c.cost)).join('/')} @ ${e.times.join('|')}`,
      );
      throw new Error(
        `Redis and memory disagree at step ${events.length - 1} (${firstMismatch!.diff}).\npolicies: ${JSON.stringify(specs)}\n` +
          `history (op costs @ server ms):\n  ${history.join('\n  ')}\n` +
          `redis:  ${JSON.stringify(fromRedis)}\nmemory: ${JSON.stringify(firstMismatch!.fromMemory)}`,
      );
    }
    worlds = survivors.length > 1 ? await merge(events, survivors) : survivors;
    if (step.op === 'consume' && fromRedis.allowed) consumed.push(calls);
  }
  return { ambiguous };
}

async function check(kind: RedisClientKind, arb: fc.Arbitrary<[PolicySpec[], Step[]]>): Promise<void> {
  await fc.assert(
    fc.asyncProperty(arb, async ([specs, steps]) => {
      await runTrace(kind, specs, steps);
    }),
    // Real time cannot be replayed, so shrinking would not reproduce a failure: the error carries the trace.
    { numRuns: RUNS, endOnFailure: true },
  );
}

describe.each(REDIS_CLIENTS)('$name: Lua scripts on Redis and TypeScript twins decide identically', (kind) => {
  for (const algorithm of ALGORITHMS) {
    test.concurrent(
      `${algorithm}: random traces of consume / peek / refund`,
      () =>
        check(
          kind,
          fc.tuple(
            policyArb(algorithm).map((p) => [p]),
            traceArb,
          ),
        ),
      60_000,
    );
  }

  test.concurrent(
    'multi-policy: 2-3 policies of mixed algorithms in one call',
    () =>
      check(
        kind,
        fc.tuple(
          fc.array(fc.constantFrom(...ALGORITHMS), { minLength: 2, maxLength: 3 }).chain((names) => fc.tuple(...names.map(policyArb))),
          traceArb,
        ),
      ),
    60_000,
  );
});
