/**
 * Outbound fairness: three processes, each starting CALLS `acquire` calls at once for one partner quota on
 * one Redis. Prints each process's share of the grants, and when the rejected calls were told: at once,
 * later, or only after waiting most of their `maxWaitMs` in vain; and the longest wait of a grant.
 *
 *   TS_NODE_SWC=true node -r ts-node/register/transpile-only bench/outbound.ts   (BENCH_ROUNDS, BENCH_QUICK)
 */
import { runOutboundWorkers, type WorkerReport } from '../test/support/outbound-workers';
import { benchRedis } from './support/redis';
import { heading, table } from './support/report';

const PROCESSES = 3;
const LIMIT = 10;
const WINDOW_MS = 1_000;
/** A short run (the case) and a long one, where shares settle. */
const SCENARIOS = [
  { calls: 20, maxWaitMs: 3_000 },
  { calls: 40, maxWaitMs: 10_000 },
];
/** A rejection within this of its call was told at once. */
const AT_ONCE_MS = 100;
/** A rejection after this share of `maxWaitMs` waited (nearly) all of it in vain. */
const IN_VAIN_SHARE = 0.9;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (process.env.BENCH_QUICK ? 1 : 3));
const ALGORITHMS = ['gcra', 'fixed-window', 'sliding-log'];

async function main(): Promise<void> {
  const redis = await benchRedis();
  heading('Outbound: three processes sharing one partner quota', { processes: PROCESSES, limit: LIMIT, windowMs: WINDOW_MS });
  try {
    const rows: string[][] = [];
    for (const { calls, maxWaitMs } of SCENARIOS) {
      for (const algorithm of ALGORITHMS) {
        for (let round = 1; round <= ROUNDS; round++) {
          const env = {
            REDIS_PORT: String(redis.port),
            PREFIX: `bench-outbound-${process.pid}-${calls}-${algorithm}-${round}`,
            ALGORITHM: algorithm,
            LIMIT: String(LIMIT),
            WINDOW_MS: String(WINDOW_MS),
            CALLS: String(calls),
            MAX_WAIT_MS: String(maxWaitMs),
          };
          const reports = await runOutboundWorkers(Array.from({ length: PROCESSES }, () => env));
          rows.push([`${PROCESSES} × ${calls}, maxWaitMs ${maxWaitMs}`, algorithm, String(round), ...summarize(reports, maxWaitMs)]);
        }
      }
    }
    console.log(
      table(
        [
          'calls',
          'algorithm',
          'round',
          'granted per process',
          'rejected at once / later / after ≥ 90 % of maxWaitMs',
          'rejections told after (median / max ms)',
          'longest wait of a grant (ms)',
        ],
        rows,
      ),
    );
  } finally {
    await redis.stop();
  }
}

function summarize(reports: WorkerReport[], maxWaitMs: number): string[] {
  const calls = reports.flatMap((r) => r.calls);
  const rejected = calls
    .filter((c) => c.outcome !== 'granted')
    .map((c) => c.ms)
    .sort((a, b) => a - b);
  const atOnce = rejected.filter((ms) => ms <= AT_ONCE_MS).length;
  const inVain = rejected.filter((ms) => ms >= IN_VAIN_SHARE * maxWaitMs).length;
  const granted = calls.filter((c) => c.outcome === 'granted').map((c) => c.ms);
  return [
    reports.map((r) => r.calls.filter((c) => c.outcome === 'granted').length).join(' / '),
    `${atOnce} / ${rejected.length - atOnce - inVain} / ${inVain}`,
    rejected.length === 0 ? '–' : `${rejected[Math.floor(rejected.length / 2)].toFixed(0)} / ${rejected[rejected.length - 1].toFixed(0)}`,
    granted.length === 0 ? '–' : Math.max(...granted).toFixed(0),
  ];
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
