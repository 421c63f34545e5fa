import { RateLimitConfigError } from '../../../errors/rate-limit-config.error';
import { isGlideClient, isIoredisClient, isNodeRedisClient, type RedisClient } from '../../../interfaces/client-types';
import { GlideTransport } from './glide.transport';
import { IoredisTransport } from './ioredis.transport';
import { NodeRedisTransport } from './node-redis.transport';
import type { RedisScriptTransport } from './redis-transport';

/** The transport for a client of any supported library, told apart by shape (no import of the optional peers). */
export function transportFor(client: RedisClient): RedisScriptTransport {
  if (isIoredisClient(client)) return new IoredisTransport(client);
  if (isNodeRedisClient(client)) return new NodeRedisTransport(client);
  if (isGlideClient(client)) return new GlideTransport(client);
  throw new RateLimitConfigError(
    'redis: not a client this library knows (ioredis Redis/Cluster, node-redis 5 client/cluster, or Valkey GLIDE 2 client/cluster client)',
  );
}
