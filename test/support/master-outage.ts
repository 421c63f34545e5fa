/**
 * A steady load of decisions on trackers of every master of a real Redis Cluster, for the specs that kill one
 * master (failover.redis.spec.ts, shard-outage.redis.spec.ts): which master serves each tracker, the load
 * itself, and when the killed master's keys are decided by Redis again.
 */
import type { Redis } from 'ioredis';
import { trackerKeyPrefix } from '../../lib/shared/keys';

/** One decision: the master serving its tracker (by port), when it was answered, and whether Redis decided it. */
export interface Sample {
  master: number;
  at: number;
  byRedis: boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const now = () => performance.now();

/** Which master (by port) serves each slot, per CLUSTER SLOTS. */
export async function slotOwners(probe: Redis): Promise<Map<number, number>> {
  const owners = new Map<number, number>();
  for (const [from, to, master] of await probe.cluster('SLOTS')) {
    for (let slot = from; slot <= to; slot++) owners.set(slot, master[1]);
  }
  return owners;
}

/**
 * `perMaster` service keys (`client-<i>`, so the trackers `by:client-<i>`, keyed under `prefix`) for each master
 * port, found by CLUSTER KEYSLOT.
 */
export async function trackersByMaster(
  probe: Redis,
  masters: readonly number[],
  prefix: string,
  perMaster: number,
): Promise<Map<number, string[]>> {
  const owners = await slotOwners(probe);
  const byMaster = new Map<number, string[]>(masters.map((port) => [port, []]));
  for (let i = 0; [...byMaster.values()].some((t) => t.length < perMaster); i++) {
    const tracker = `client-${i}`;
    const group = byMaster.get(owners.get((await probe.cluster('KEYSLOT', trackerKeyPrefix(prefix, `by:${tracker}`))) as number)!)!;
    if (group.length < perMaster) group.push(tracker);
  }
  return byMaster;
}

/** A running load: its samples and failures so far, and `stop()`, which resolves once every decision has settled. */
export interface SteadyLoad {
  samples: Sample[];
  failures: unknown[];
  stop(): Promise<void>;
}

/** One decision per master every `everyMs`, each on the next tracker of that master's group. */
export function steadyLoad(
  decide: (tracker: string) => Promise<{ reason?: unknown }>,
  byMaster: ReadonlyMap<number, readonly string[]>,
  everyMs: number,
): SteadyLoad {
  const samples: Sample[] = [];
  const failures: unknown[] = [];
  const inFlight = new Set<Promise<void>>();
  let running = true;
  const load = (async () => {
    for (let round = 0; running; round++) {
      for (const [master, trackers] of byMaster) {
        const p = decide(trackers[round % trackers.length])
          .then((d) => void samples.push({ master, at: now(), byRedis: d.reason === undefined }))
          .catch((error: unknown) => void failures.push(error))
          .finally(() => inFlight.delete(p));
        inFlight.add(p);
      }
      await sleep(everyMs);
    }
  })();
  return {
    samples,
    failures,
    stop: async () => {
      running = false;
      await load;
      await Promise.all([...inFlight]);
    },
  };
}

/**
 * When the killed master's keys were first decided by Redis after their last fallback, once that has held for
 * 500 ms (checked every 50 ms); Infinity when it has not within 20 s of the kill.
 */
export async function backOnRedis(samples: readonly Sample[], victim: number, killedAt: number): Promise<number> {
  while (now() - killedAt < 20_000) {
    await sleep(50);
    const victims = samples.filter((s) => s.master === victim && s.at > killedAt);
    const lastFallback = Math.max(killedAt, ...victims.filter((s) => !s.byRedis).map((s) => s.at));
    const since = victims.filter((s) => s.byRedis && s.at > lastFallback);
    if (victims.some((s) => !s.byRedis) && since.length > 0 && now() - since[0].at > 500) return since[0].at;
  }
  return Infinity;
}
