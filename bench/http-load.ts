/**
 * The load generator of bench/http.ts, in its own process so it never shares an event loop with the app:
 * receives `{ url, seconds, connections }` over IPC, runs autocannon, answers with its summary.
 */
import autocannon from 'autocannon';

/** What bench/http.ts asks for. */
export interface LoadRequest {
  url: string;
  seconds: number;
  connections: number;
}

/** What it gets back. */
export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  total: number;
  non2xx: number;
  errors: number;
}

async function run({ url, seconds, connections }: LoadRequest): Promise<LoadResult> {
  const r = await autocannon({ url, connections, duration: seconds });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, total: r.requests.total, non2xx: r.non2xx, errors: r.errors };
}

if (require.main === module) {
  process.on('message', (request: LoadRequest) => {
    run(request).then(
      (result) => process.send!({ result }),
      (error: Error) => process.send!({ error: error.message }),
    );
  });
}
