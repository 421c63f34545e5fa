import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { WorkerReport } from './outbound-worker';

export type { CallOutcome, WorkerReport } from './outbound-worker';

const ROOT = join(__dirname, '..', '..');
const WORKER = join(__dirname, 'outbound-worker.ts');

/**
 * Starts one `outbound-worker.ts` process per env, waits until every one is connected and ready, releases
 * them together (their calls race for one quota) and returns what each printed, in order. Kills its
 * children when one fails or `timeoutMs` passes.
 */
export async function runOutboundWorkers(envs: ReadonlyArray<Record<string, string>>, timeoutMs = 60_000): Promise<WorkerReport[]> {
  const children: ChildProcess[] = [];
  const ready: Promise<void>[] = [];
  const reports: Promise<WorkerReport>[] = [];
  for (const env of envs) {
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', WORKER], {
      cwd: ROOT,
      env: { ...process.env, TS_NODE_PROJECT: join(ROOT, 'tsconfig.json'), ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stderr!.on('data', (chunk) => (stderr += String(chunk)));
    let markReady: () => void;
    ready.push(new Promise<void>((resolve) => (markReady = resolve)));
    reports.push(
      new Promise<WorkerReport>((resolve, reject) => {
        child.stdout!.on('data', (chunk) => {
          stdout += String(chunk);
          if (stdout.includes('"ready":true')) markReady();
        });
        child.on('error', reject);
        child.on('exit', (code) => {
          const last = stdout.trim().split('\n').pop() ?? '';
          if (code === 0 && last.includes('"grants"')) resolve(JSON.parse(last) as WorkerReport);
          else reject(new Error(`outbound-worker exited with ${code}\nstdout: ${stdout}\nstderr: ${stderr}`));
        });
      }),
    );
  }
  const timer = setTimeout(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')), timeoutMs);
  try {
    // A worker that dies before it is ready rejects its report: race the two so that surfaces at once.
    await Promise.race([Promise.all(ready), Promise.all(reports)]);
    for (const child of children) child.stdin!.end('go\n');
    return await Promise.all(reports);
  } finally {
    clearTimeout(timer);
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
