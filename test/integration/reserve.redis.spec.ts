/**
 * Policy `reserve` under contention on Redis: 4 Node processes, each with its own ioredis connection and the
 * library's RedisStore, race 50 'default' and 50 'critical' calls each on one key (capacity 100, 20 % kept for
 * critical calls), for every algorithm, as one policy (`consume`: the one-policy script, or decide.lua's lean
 * path for a batch) and as two (`consumeAll`: decide.lua's general path). Long windows: nothing refills.
 *  - Phased (every worker's 'default' calls, then, past a barrier, the 'critical' ones): exactly 80 'default'
 *    calls admitted and 120 refused by the reserve; exactly 20 'critical' ones admitted and 180 refused by the
 *    plain limit.
 *  - Interleaved (all at once): whatever the order, exactly 100 admitted; at most 80 of them 'default'; no
 *    'critical' call refused by the reserve; every call refused.
 */
import { join } from 'node:path';
import { RATE_LIMIT_ALGORITHMS } from '../../lib/interfaces/policy.interface';
import type { ReserveWorkerResult, ReserveTally } from '../support/reserve-worker';
import { startRedis, type RedisProcess } from '../support/redis-server';
import { runWorkerProcesses } from '../support/workers';

const WORKERS = 4;
const CALLS = 50;
const WORKER = join(__dirname, '..', 'support', 'reserve-worker.ts');

let redis: RedisProcess;

beforeAll(async () => {
  redis = await startRedis();
}, 30_000);

afterAll(() => redis?.stop());

/** Each algorithm/shape's tallies, summed over the workers. */
async function race(order: 'phased' | 'interleaved'): Promise<ReserveWorkerResult['counts']> {
  const env = { REDIS_PORT: String(redis.port), PREFIX: `reserve-${order}`, ORDER: order, WORKERS: String(WORKERS), CALLS: String(CALLS) };
  const results = await runWorkerProcesses<ReserveWorkerResult>(
    WORKER,
    '"counts"',
    Array.from({ length: WORKERS }, () => env),
    {
      timeoutMs: 90_000,
    },
  );
  const totals: ReserveWorkerResult['counts'] = {};
  const add = (a: ReserveTally | undefined, b: ReserveTally): ReserveTally => ({
    allowed: (a?.allowed ?? 0) + b.allowed,
    reserved: (a?.reserved ?? 0) + b.reserved,
    limited: (a?.limited ?? 0) + b.limited,
  });
  for (const { counts } of results) {
    for (const [run, tally] of Object.entries(counts)) {
      totals[run] = { default: add(totals[run]?.default, tally.default), critical: add(totals[run]?.critical, tally.critical) };
    }
  }
  return totals;
}

const RUNS = RATE_LIMIT_ALGORITHMS.flatMap((algorithm) => [`${algorithm}/one`, `${algorithm}/two`]);

describe(`reserve on Redis: ${WORKERS} processes × ${CALLS} 'default' + ${CALLS} 'critical' calls, capacity 100, 20 % for critical`, () => {
  it("phased: exactly 80 'default' calls admitted, then exactly 20 'critical' ones", async () => {
    const totals = await race('phased');
    const expected = {
      default: { allowed: 80, reserved: 120, limited: 0 },
      critical: { allowed: 20, reserved: 0, limited: 180 },
    };
    expect(totals).toEqual(Object.fromEntries(RUNS.map((run) => [run, expected])));
  }, 120_000);

  it("interleaved: exactly 100 admitted, at most 80 of them 'default', no 'critical' call refused by the reserve", async () => {
    const totals = await race('interleaved');
    expect(Object.keys(totals).sort()).toEqual([...RUNS].sort());
    const wrong = Object.entries(totals).filter(
      ([, { default: d, critical: c }]) =>
        d.allowed + c.allowed !== 100 ||
        d.allowed > 80 ||
        c.reserved !== 0 ||
        d.allowed + d.reserved + d.limited !== WORKERS * CALLS ||
        c.allowed + c.limited !== WORKERS * CALLS,
    );
    expect(wrong).toEqual([]);
  }, 120_000);
});
