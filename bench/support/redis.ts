import { startRedis } from '../../test/support/redis-server';
import { settings } from './settings';

/** A Redis for one bench part: our own redis-server on a free port, or BENCH_REDIS_PORT's. */
export interface BenchRedis {
  port: number;
  /** Stops the server if this part started it. */
  stop(): Promise<void>;
}

export async function benchRedis(): Promise<BenchRedis> {
  if (settings.redisPort) return { port: settings.redisPort, stop: async () => undefined };
  const redis = await startRedis();
  return { port: redis.port, stop: () => redis.stop() };
}
