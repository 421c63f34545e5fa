import { join } from 'node:path';
import type { WorkerReport } from './outbound-worker';
import { runWorkerProcesses } from './workers';

export type { CallOutcome, WorkerReport } from './outbound-worker';

const WORKER = join(__dirname, 'outbound-worker.ts');

/**
 * Starts one `outbound-worker.ts` process per env, waits until every one is connected and ready, releases
 * them together (their calls race for one quota) and returns what each printed, in order.
 */
export function runOutboundWorkers(envs: ReadonlyArray<Record<string, string>>, timeoutMs = 60_000): Promise<WorkerReport[]> {
  return runWorkerProcesses<WorkerReport>(WORKER, '"grants"', envs, { timeoutMs });
}
