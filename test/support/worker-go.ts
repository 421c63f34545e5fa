/**
 * A worker process's side of the start signal (test/support/workers.ts, exactness.redis.spec.ts): prints
 * `{"ready":true}`, then resolves with what follows "go" on the first such line of stdin (empty for a bare
 * "go"), so every worker starts its race at once.
 */
export function readyThenGo(): Promise<string> {
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
  return new Promise((resolve) => {
    let buffer = '';
    process.stdin.on('data', (chunk) => {
      buffer += String(chunk);
      const go = /go ?(.*)\n/.exec(buffer);
      if (go) resolve(go[1]);
    });
  });
}
