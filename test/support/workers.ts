import { spawn, type ChildProcess } from 'node:child_process';
import { basename, join } from 'node:path';

/** What one consume-worker printed: admitted calls per algorithm, and its (possibly skewed) Date.now(). */
export interface WorkerResult {
  allowed: Record<string, number>;
  now: number;
}

const ROOT = join(__dirname, '..', '..');
const WORKER = join(__dirname, 'consume-worker.ts');

/**
 * Starts one `consume-worker.ts` process per env, waits until every one is connected and ready, releases
 * them together (so their calls race; `beforeGo` runs just before), and returns what each printed. Kills its children on failure.
 */
export function runWorkers(
  envs: ReadonlyArray<Record<string, string>>,
  options: { timeoutMs?: number; beforeGo?: () => Promise<void> } = {},
): Promise<WorkerResult[]> {
  return runWorkerProcesses<WorkerResult>(WORKER, '"allowed"', envs, options);
}

/**
 * Starts `worker` (a .ts file) once per env, waits until each printed `"ready":true`, releases them together
 * (a `go` line on stdin; `beforeGo` runs just before) and resolves with each one's last stdout line, parsed,
 * once it exited 0 with that line holding `resultMarker`. Kills its children when one fails or `timeoutMs` passes.
 */
export async function runWorkerProcesses<R>(
  worker: string,
  resultMarker: string,
  envs: ReadonlyArray<Record<string, string>>,
  options: { timeoutMs?: number; beforeGo?: () => Promise<void> } = {},
): Promise<R[]> {
  const { timeoutMs = 60_000, beforeGo } = options;
  const children: ChildProcess[] = [];
  const ready: Promise<void>[] = [];
  const results: Promise<R>[] = [];
  for (const env of envs) {
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', worker], {
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
    results.push(
      new Promise<R>((resolve, reject) => {
        child.stdout!.on('data', (chunk) => {
          stdout += String(chunk);
          if (stdout.includes('"ready":true')) markReady();
        });
        child.on('error', reject);
        child.on('exit', (code) => {
          const last = stdout.trim().split('\n').pop() ?? '';
          if (code === 0 && last.includes(resultMarker)) resolve(JSON.parse(last) as R);
          else reject(new Error(`${basename(worker)} exited with ${code}\nstdout: ${stdout}\nstderr: ${stderr}`));
        });
      }),
    );
  }
  const timer = setTimeout(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')), timeoutMs);
  try {
    // A worker that dies before it is ready rejects its result: race the two so that surfaces at once.
    await Promise.race([Promise.all(ready), Promise.all(results)]);
    await beforeGo?.();
    for (const child of children) child.stdin!.end('go\n');
    return await Promise.all(results);
  } finally {
    clearTimeout(timer);
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
