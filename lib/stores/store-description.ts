import type { ClusterNode, RedisOptions } from 'ioredis';
import { hidePassword } from '../shared/hide-password';
import {
  isGlideClient,
  isGlideCluster,
  isNodeRedisClient,
  isNodeRedisCluster,
  type GlideClientLike,
  type NodeRedisClientLike,
  type RedisClient,
} from '../interfaces/client-types';

/** What the module logs at startup for the in-process memory store. */
export const MEMORY_STORE_DESCRIPTION =
  'Rate limits are kept in process memory (per process — set `redis` to share limits between instances).';

/**
 * What the module logs at startup: where rate limits are kept.
 * @example describeStore('redis://:secret@10.0.0.5:6379') // 'Rate limits are kept in Redis at 10.0.0.5:6379.'
 */
export function describeStore(redis: string | RedisOptions | RedisClient | undefined): string {
  return redis === undefined ? MEMORY_STORE_DESCRIPTION : `Rate limits are kept in ${describeRedis(redis)}.`;
}

/**
 * A Redis store as log lines name it, from the `redis` option (a URL, ioredis options, or a client): `Redis at
 * host:port`, `Redis Cluster (host:port, …)` of the startup nodes, or `Redis Sentinel master "name" via
 * host:port, …`; a node-redis or GLIDE client adds ` via node-redis` / ` via Valkey GLIDE` (ioredis is the
 * default, unnamed). Never a password: only hosts, ports and names are read.
 * @example describeRedis(createCluster({ rootNodes: [{ url: 'redis://10.0.0.1:7000' }] })) // 'Redis Cluster (10.0.0.1:7000) via node-redis'
 */
export function describeRedis(redis: string | RedisOptions | RedisClient): string {
  if (typeof redis === 'string') return `Redis at ${describeUrl(redis, 'localhost')}`;
  if (isNodeRedisClient(redis)) return `${describeNodeRedis(redis)} via node-redis`;
  if (isGlideClient(redis)) return `${describeGlide(redis)} via Valkey GLIDE`;
  if ('startupNodes' in redis) {
    const nodes = (redis as unknown as { startupNodes: ClusterNode[] }).startupNodes;
    return `Redis Cluster (${nodes.map(describeNode).join(', ')})`;
  }
  return describeOptions('options' in redis ? (redis.options as RedisOptions) : (redis as RedisOptions));
}

/** A node-redis client by its `url` or `socket` options; a cluster by its root nodes. */
function describeNodeRedis(client: NodeRedisClientLike): string {
  const { options, _options } = client as { options?: NodeRedisNode; _options?: { rootNodes?: NodeRedisNode[] } };
  if (isNodeRedisCluster(client)) return `Redis Cluster (${(_options?.rootNodes ?? []).map(describeNodeRedisNode).join(', ')})`;
  return `Redis at ${describeNodeRedisNode(options ?? {})}`;
}

/** A node-redis client's address options (a socket path, or host and port; localhost:6379 by default). */
interface NodeRedisNode {
  url?: string;
  socket?: { host?: string; port?: number; path?: string };
}

function describeNodeRedisNode({ url, socket }: NodeRedisNode): string {
  if (socket?.path) return socket.path;
  if (socket?.host !== undefined || socket?.port !== undefined) return hostPort(socket.host ?? 'localhost', socket.port ?? 6379);
  return url === undefined ? hostPort('localhost', 6379) : describeUrl(url, 'localhost');
}

/** A GLIDE client by the addresses it was created with (read from its configuration, which GLIDE keeps). */
function describeGlide(client: GlideClientLike): string {
  const { config } = client as { config?: { addresses?: Array<{ host?: string; port?: number }> } };
  const addresses = (config?.addresses ?? []).map((a) => hostPort(a.host ?? 'localhost', a.port ?? 6379));
  if (isGlideCluster(client)) return `Redis Cluster (${addresses.join(', ')})`;
  return `Redis at ${addresses.join(', ') || 'an unknown address'}`;
}

function describeOptions(options: RedisOptions): string {
  const { sentinels, name, path, host, port } = options;
  if (sentinels && sentinels.length > 0) {
    const via = sentinels.map((s) => hostPort(s.host ?? 'localhost', s.port ?? 26379)).join(', ');
    return `Redis Sentinel master ${JSON.stringify(name ?? '')} via ${via}`;
  }
  return `Redis at ${path ?? hostPort(host ?? 'localhost', port ?? 6379)}`;
}

/** A cluster startup node as ioredis reads it: a port, `host:port`, a URL, or `{ host, port }` (127.0.0.1:6379 by default). */
function describeNode(node: ClusterNode): string {
  if (typeof node === 'number') return hostPort('127.0.0.1', node);
  if (typeof node === 'string') return /^\d+$/.test(node) ? hostPort('127.0.0.1', Number(node)) : describeUrl(node, '127.0.0.1');
  return hostPort(node.host ?? '127.0.0.1', node.port ?? 6379);
}

/** `host:port` of a URL (ioredis also reads `host:port` without a scheme); the URL without its password if it does not parse. */
function describeUrl(url: string, defaultHost: string): string {
  try {
    const parsed = new URL(url.includes('//') ? url : `redis://${url}`);
    return hostPort(parsed.hostname.replace(/^\[(.*)\]$/, '$1') || defaultHost, Number(parsed.port) || 6379);
  } catch {
    return hidePassword(url);
  }
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Why a connection failed, in one line: the error's message, every attempt's message for an `AggregateError`
 * (a host name resolving to several addresses) and the last node's error for a cluster that found no node.
 */
export function describeCause(error: Error): string {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return [...new Set(error.errors.map((e: unknown) => (e instanceof Error ? describeCause(e) : String(e))))].join('; ');
  }
  // ioredis's words for a command sent while its connection is down (with no offline queue, as the library's own client).
  if (/^Stream isn't writeable/.test(error.message)) return `no connection (ioredis: "${error.message}")`;
  // Redis ends its messages with a full stop; the log line goes on after the cause.
  const text = (error.message || (error as NodeJS.ErrnoException).code || error.name).replace(/\.+$/, '');
  const { lastNodeError } = error as { lastNodeError?: unknown };
  return lastNodeError instanceof Error ? `${text} (last node error: ${describeCause(lastNodeError)})` : text;
}

/**
 * Whether a connection error will not go away by waiting a few seconds: nothing listens at the address, the
 * name does not resolve, the credentials or the TLS setup are wrong. The module stops waiting at startup then.
 */
export function isDefiniteConnectionError(error: Error): boolean {
  if (error instanceof AggregateError && error.errors.length > 0) {
    return error.errors.every((e: unknown) => e instanceof Error && isDefiniteConnectionError(e));
  }
  const { lastNodeError } = error as { lastNodeError?: unknown };
  if (lastNodeError instanceof Error) return isDefiniteConnectionError(lastNodeError);
  const code = (error as NodeJS.ErrnoException).code ?? '';
  return (
    code === 'ECONNREFUSED' ||
    code === 'ENOTFOUND' ||
    /^ERR_(SSL|TLS)_|CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/.test(code) ||
    /^(WRONGPASS|NOAUTH|NOPERM)\b|invalid password/i.test(error.message)
  );
}

export { hidePassword };
