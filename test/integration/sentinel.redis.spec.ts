/**
 * Redis Sentinel, against real processes (a master, a replica and 3 sentinels, quorum 2):
 *  - A store the library creates from `{ sentinels, name }` follows `SENTINEL FAILOVER` at once (ioredis
 *    `failoverDetector`): decisions reach the new master about a second after the failover starts, not when
 *    the old master is finally demoted (~11 s later, and every decision it took meanwhile was lost). A fixed
 *    window of 100 under a steady stream across the failover admits 100, plus only the decisions the old
 *    master took between the replica's promotion and the sentinels' `+switch-master` (replication is
 *    asynchronous, and the sentinels announce the new master only once they have seen it promoted). That
 *    excess is bounded absolutely too: at most 30 over the limit (the client that stayed on the old master
 *    admitted 60 over).
 * The README's ACL, through Sentinel too, is checked in acl.redis.spec.ts.
 */
import { Redis } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../../lib/interfaces/module-options.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { startRedisSentinel, type RedisSentinelProcess } from '../support/redis-server';
import { ownedClientOf, serviceOver } from '../support/store-chain';

const registry = new RateLimitAlgorithmRegistry();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

const setups: RedisSentinelProcess[] = [];
const stores: RateLimitStore[] = [];
const clients: Redis[] = [];

afterAll(async () => {
  for (const store of stores) await store.close().catch(() => undefined);
  for (const client of clients) client.disconnect();
  for (const setup of setups) await setup.stop();
});

/** A store and service built as the module builds them (`createStore`), connected before it returns. */
async function service(options: RateLimitModuleOptions): Promise<{ svc: RateLimiterService; store: RateLimitStore }> {
  const { svc, store } = serviceOver(options, registry);
  stores.push(store);
  expect(await store.ready?.(5_000)).toBe(true);
  return { svc, store };
}

interface Sample {
  sentAt: number;
  doneAt: number;
  allowed: boolean;
  byRedis: boolean;
  /** The server whose connection the client was on when the decision came back. */
  port: number | undefined;
}

describe('Sentinel failover', () => {
  const LIMIT = 100;
  const PACE_MS = 20;
  /** Decisions that may be on the wire to the old master when the client leaves it. */
  const IN_FLIGHT = 2;

  it('a client created from { sentinels, name } follows SENTINEL FAILOVER at once; a fixed window of 100 admits 100 + what the old master took after the promotion', async () => {
    const setup = await startRedisSentinel({ replicas: 1, sentinels: 3, quorum: 2, downAfterMs: 1_000, failoverTimeoutMs: 3_000 });
    setups.push(setup);
    const oldPort = setup.master.port;
    const newPort = setup.replicas[0].port;
    // fail-closed, no hot-key shedding: every admission is one Redis said yes to, and every decision asks Redis.
    const { svc, store } = await service({
      redis: { sentinels: setup.sentinelAddresses, name: setup.name },
      onStoreError: 'fail-closed',
      hotKeyShedding: false,
    });
    const client = ownedClientOf(store);
    const policy: RateLimitPolicy = { algorithm: 'fixed-window', limit: LIMIT, window: '1h', name: 'failover' };

    // The failover is asked of the last sentinel, not the first one the client resolves the master with. It
    // announces each step; it sends the replica REPLICAOF NO ONE as it enters wait-promotion. (Polling the
    // replica's ROLE would not do: the same transaction kills the replica's clients.)
    const sentinel = new Redis({ port: setup.sentinels[2].port, maxRetriesPerRequest: 1 });
    const events = new Redis({ port: setup.sentinels[2].port, maxRetriesPerRequest: 1 });
    clients.push(sentinel, events);
    let promotedAt = Infinity;
    let switchedAt = Infinity;
    let leftOldAt = Infinity;
    await events.subscribe('+failover-state-wait-promotion', '+switch-master');
    events.on('message', (channel: string) => {
      if (channel === '+failover-state-wait-promotion') promotedAt = Math.min(promotedAt, now());
      else switchedAt = Math.min(switchedAt, now());
    });
    client.on('close', () => {
      leftOldAt = Math.min(leftOldAt, now());
    });

    const samples: Sample[] = [];
    const inFlight: Array<Promise<void>> = [];
    let failoverAt = Infinity;
    const started = now();
    for (let i = 0; ; i++) {
      if (i === 30) {
        failoverAt = now();
        expect(await sentinel.call('SENTINEL', 'FAILOVER', setup.name)).toBe('OK');
      }
      const sentAt = now();
      inFlight.push(
        svc.consume(policy, 'tracker').then((d) => {
          samples.push({ sentAt, doneAt: now(), allowed: d.allowed, byRedis: d.reason === undefined, port: client.stream?.remotePort });
        }),
      );
      // Until Redis itself rejects on the new master (the window is full there), or 20 s.
      if (samples.some((s) => s.port === newPort && s.byRedis && !s.allowed) || now() - started > 20_000) break;
      await sleep(PACE_MS);
    }
    await Promise.all(inFlight);

    const admitted = samples.filter((s) => s.allowed).length;
    const fallbacks = samples.filter((s) => !s.byRedis).length;
    const onNew = samples.filter((s) => s.byRedis && s.port === newPort);
    const reachedNewAt = Math.min(...onNew.map((s) => s.doneAt));
    // Admissions the old master acknowledged once the replica no longer replicated from it: lost when it is demoted.
    const afterPromotion = samples.filter((s) => s.allowed && s.byRedis && s.port === oldPort && s.doneAt >= promotedAt).length;
    console.log(
      `Sentinel failover: ${samples.length} decisions every ${PACE_MS} ms, SENTINEL FAILOVER after 30; replica promoted ` +
        `${Math.round(promotedAt - failoverAt)} ms after it, +switch-master after ${Math.round(switchedAt - failoverAt)} ms, client left the old master after ${Math.round(leftOldAt - failoverAt)} ms, ` +
        `first decision by the new master after ${Math.round(reachedNewAt - failoverAt)} ms (${Math.round(reachedNewAt - promotedAt)} ms after the ` +
        `promotion); ${admitted} of limit ${LIMIT} admitted, ${afterPromotion} of them by the old master after the promotion (lost with ` +
        `its demotion); ${fallbacks} decided by onStoreError (fail-closed) while reconnecting.`,
    );
    // The client leaves the old master when the sentinels announce the new one, not when the old one is demoted.
    expect(leftOldAt - switchedAt).toBeLessThan(100);
    expect(reachedNewAt - failoverAt).toBeLessThan(3_000);
    // Exact but for the decisions the old master took between the promotion and the switch...
    expect(admitted).toBeGreaterThanOrEqual(LIMIT);
    expect(admitted - LIMIT).toBeLessThanOrEqual(afterPromotion);
    // ...which are few: those paced between the promotion and the client leaving (which follows the sentinels'
    // announcement within 100 ms, above), plus the calls in flight. How long the sentinels take to announce is
    // theirs (0.1 - 1 s seen); a client left on the old master until its demotion admitted 160 (60 lost).
    expect(admitted).toBeLessThanOrEqual(LIMIT + Math.ceil((leftOldAt - promotedAt) / PACE_MS) + IN_FLIGHT);
  }, 45_000);
});
