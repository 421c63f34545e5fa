/**
 * A reshard is not an outage. On a real 3-master Cluster with a replica each, 3,000 slots move from one master
 * to another (`redis-cli --cluster reshard`, run asynchronously: this process keeps deciding throughout) while
 * decisions flow with default options (storeTimeoutMs 100, insurance). Keys whose slot does not move are
 * never decided by a fallback; keys whose slot moves may be, only while it moves; and once the reshard has
 * ended, fresh keys are decided by Redis from the first decision.
 */
import { spawn } from 'node:child_process';
import { Redis, type Cluster } from 'ioredis';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import type { RateLimitDecision } from '../../lib/interfaces/decision.interface';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import type { RateLimiterService } from '../../lib/rate-limiter.service';
import { hashSlot } from '../../lib/stores/redis/cluster-slot';
import type { RateLimitStore } from '../../lib/stores/store.interface';
import { libraryCluster, startRedisCluster, type RedisClusterProcess } from '../support/redis-server';
import { serviceOver } from '../support/store-chain';

const registry = new RateLimitAlgorithmRegistry();
const POLICY: RateLimitPolicy = { algorithm: 'gcra', limit: 1_000_000, window: '1h', name: 'reshard' };
let cluster: RedisClusterProcess;
let client: Cluster;
let store: RateLimitStore;
let svc: RateLimiterService;

beforeAll(async () => {
  cluster = await startRedisCluster(3, { replicas: 1 });
  client = await libraryCluster(cluster.startupNodes);
  ({ svc, store } = serviceOver({ redis: client }, registry));
}, 60_000);

afterAll(async () => {
  await store?.close();
  client?.disconnect();
  await cluster?.stop();
});

/** The master serving each slot (`host:port`), from `CLUSTER SLOTS` of a node. */
async function slotOwners(port: number): Promise<string[]> {
  const admin = new Redis({ port });
  const ranges = await admin.cluster('SLOTS');
  admin.disconnect();
  const owners: string[] = [];
  for (const [from, to, master] of ranges) for (let slot = from; slot <= to; slot++) owners[slot] = `${master[0]}:${master[1]}`;
  return owners;
}

async function nodeId(port: number): Promise<string> {
  const admin = new Redis({ port });
  const id = String(await admin.cluster('MYID'));
  admin.disconnect();
  return id;
}

/** `redis-cli --cluster reshard`, without blocking this process; resolves with its exit code and output. */
function reshard(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('redis-cli', ['--cluster', 'reshard', ...args, '--cluster-yes'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('close', (code) => resolve({ code, output: output.slice(-2_000) }));
  });
}

it('3,000 slots moving under load: no fallback for keys that stay, none for fresh keys once it ended', async () => {
  const [from, to] = cluster.masters;
  const before = await slotOwners(from.port);
  const trackers = Array.from({ length: 600 }, (_, i) => `tenant-${i}`);
  const answers: Array<{ tracker: string; decision: RateLimitDecision }> = [];
  let moving = true;
  const load = (async () => {
    while (moving) {
      const turn = await Promise.all(trackers.map(async (tracker) => ({ tracker, decision: await svc.consume(POLICY, tracker) })));
      answers.push(...turn);
    }
  })();
  const moved = await reshard([
    `127.0.0.1:${from.port}`,
    '--cluster-from',
    await nodeId(from.port),
    '--cluster-to',
    await nodeId(to.port),
    '--cluster-slots',
    '3000',
  ]);
  moving = false;
  await load;
  expect(moved).toMatchObject({ code: 0 });
  const after = await slotOwners(from.port);
  const movedSlots = new Set(before.flatMap((owner, slot) => (owner !== after[slot] ? [slot] : [])));
  expect(movedSlots.size).toBe(3_000);

  // Every key of a tracker shares one hash tag, as the service builds its keys (its deny key among them).
  const slotOf = (tracker: string) => hashSlot((svc as unknown as { calls: { denyKey(key: string): string } }).calls.denyKey(tracker));
  const staying = answers.filter((a) => !movedSlots.has(slotOf(a.tracker)));
  const fellBack = (list: typeof answers) => list.filter((a) => a.decision.reason === 'store-unavailable').length;
  console.log(
    `reshard of 3,000 slots: ${answers.length} decisions, ${staying.length} on keys that stayed (${fellBack(staying)} by a fallback), ` +
      `${answers.length - staying.length} on keys that moved (${fellBack(answers) - fellBack(staying)} by a fallback)`,
  );
  expect(staying.length).toBeGreaterThan(0);
  expect(fellBack(staying)).toBe(0);

  // Fresh keys, right after the reshard: every one decided by Redis.
  const fresh = await Promise.all(Array.from({ length: 200 }, (_, i) => svc.consume(POLICY, `fresh-${i}`)));
  expect(fresh.filter((d) => d.reason === 'store-unavailable')).toHaveLength(0);
}, 120_000);
