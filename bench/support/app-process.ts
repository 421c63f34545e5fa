/**
 * The HTTP parts' app processes (bench/http-app.ts): what each is told, how its ports are learned, and how
 * it is stopped. bench/http.ts runs them under Node, bench/instructions.ts under valgrind.
 */
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { HttpVariant, LimitMode } from '../http-app';
import { settings } from './settings';

/** The environment of one variant's app on one adapter. */
export function appEnv(variant: HttpVariant, adapter: string, redisUrl: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    BENCH_VARIANT: variant,
    BENCH_ADAPTER: adapter,
    BENCH_REDIS_URL: redisUrl,
    BENCH_HTTP_ALGORITHM: settings.httpAlgorithm,
  };
}

/** The allow-all and reject-all ports, from the app's `READY {...}` line; rejects if it exits first. */
export function appPorts(child: ChildProcess, label: string): Promise<Record<LimitMode, number>> {
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${label} app exited with ${code} before listening`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('READY ')) resolve(JSON.parse(line.slice(6)) as Record<LimitMode, number>);
    });
  });
}

/** The limit modes measured for a variant: the bare app has no limit, so one measurement serves both. */
export function measuredModes(variant: HttpVariant): readonly LimitMode[] {
  return variant === 'bare' ? ['allow'] : ['allow', 'reject'];
}

/** Whether a variant answers 429 under the reject-all limit (`bare` has no limit; `noop-guard` never rejects). */
export function rejectsAll(variant: HttpVariant): boolean {
  return variant !== 'bare' && variant !== 'noop-guard';
}

/** SIGTERM, then SIGKILL if the process is still there after 5 s. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}
