/**
 * The Redis client libraries the store accepts, each set up as an app would set it up and already connected, so
 * that the integration suite runs its Redis tests once per client: `describe.each(REDIS_CLIENTS)('$name', …)`.
 * node-redis and GLIDE are loaded on first use (worker processes that use ioredis never load them).
 *
 *  - ioredis: as the library sets up the clients it creates (no offline queue, auto-pipelining; see `libraryClient`).
 *  - node-redis 5: `createClient({ url, disableOfflineQueue: true })` / `createCluster({ rootNodes, defaults: {
 *    disableOfflineQueue: true } })`, then `connect()`, as the README asks: with its offline queue, node-redis 5.12
 *    writes a command queued as the connection drops to the dead socket and keeps awaiting its reply, so after a
 *    restart it pairs replies with the wrong commands and never becomes ready (8 restarts of 14 here).
 *  - Valkey GLIDE 2: `GlideClient.createClient` / `GlideClusterClient.createClient`, with a `requestTimeout` of 5 s:
 *    GLIDE fails any call after its own `requestTimeout` (250 ms by default), which on a busy CI box would turn
 *    decisions of tests that give the store seconds into fallbacks; the store's deadline stays `storeTimeoutMs`.
 */
import type { GlideClient } from '@valkey/valkey-glide';
import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from '../../lib/interfaces/client-types';
import { libraryClient, libraryCluster } from './redis-server';

/** A cluster node address, as the test cluster lists its startup nodes. */
export interface NodeAddress {
  host: string;
  port: number;
}

/** One client library: how to connect to a standalone server and to a cluster, and how to close what it opened. */
export interface RedisClientKind {
  name: RedisClientName;
  /** A client connected to the redis-server on 127.0.0.1:`port`. */
  connect(port: number): Promise<RedisClient>;
  /** A cluster client connected to the cluster of `nodes` (slot map loaded). */
  connectCluster(nodes: readonly NodeAddress[]): Promise<RedisClient>;
  /** Closes a client this kind connected (the store never closes a client passed in). */
  close(client: RedisClient): Promise<void>;
}

export type RedisClientName = 'ioredis' | 'node-redis' | 'GLIDE';

const GLIDE_REQUEST_TIMEOUT_MS = 5_000;

/** GLIDE, its own log (warnings on stdout when a test stops a server) limited to errors. */
async function loadGlide(): Promise<typeof import('@valkey/valkey-glide')> {
  const glide = await import('@valkey/valkey-glide');
  glide.Logger.setLoggerConfig('error');
  return glide;
}

const ioredis: RedisClientKind = {
  name: 'ioredis',
  connect: (port) => libraryClient(`redis://127.0.0.1:${port}`),
  connectCluster: (nodes) => libraryCluster([...nodes]),
  close: async (client) => (client as Redis | Cluster).disconnect(),
};

const nodeRedis: RedisClientKind = {
  name: 'node-redis',
  connect: async (port) => {
    const { createClient } = await import('redis');
    const client = createClient({ url: `redis://127.0.0.1:${port}`, disableOfflineQueue: true });
    // Without a listener node-redis rethrows connection errors (a test that stops the server).
    client.on('error', () => undefined);
    return client.connect();
  },
  connectCluster: async (nodes) => {
    const { createCluster } = await import('redis');
    const cluster = createCluster({
      rootNodes: nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
      defaults: { disableOfflineQueue: true },
    });
    cluster.on('error', () => undefined);
    return cluster.connect();
  },
  close: async (client) => {
    const c = client as unknown as { isOpen: boolean; destroy(): void };
    if (c.isOpen) c.destroy();
  },
};

const glide: RedisClientKind = {
  name: 'GLIDE',
  connect: async (port) => {
    const { GlideClient } = await loadGlide();
    return GlideClient.createClient({ addresses: [{ host: '127.0.0.1', port }], requestTimeout: GLIDE_REQUEST_TIMEOUT_MS });
  },
  connectCluster: async (nodes) => {
    const { GlideClusterClient } = await loadGlide();
    return GlideClusterClient.createClient({
      addresses: nodes.map(({ host, port }) => ({ host, port })),
      requestTimeout: GLIDE_REQUEST_TIMEOUT_MS,
    });
  },
  close: async (client) => (client as GlideClient).close(),
};

/** Every client library, ioredis (the default) first. */
export const REDIS_CLIENTS: readonly RedisClientKind[] = [ioredis, nodeRedis, glide];

/** A client library by name (for worker processes, which get it from the environment). */
export function redisClientKind(name: string | undefined): RedisClientKind {
  const kind = REDIS_CLIENTS.find((k) => k.name === (name ?? 'ioredis'));
  if (!kind) throw new Error(`unknown Redis client ${JSON.stringify(name)}; one of ${REDIS_CLIENTS.map((k) => k.name).join(', ')}`);
  return kind;
}
