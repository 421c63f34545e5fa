import { Logger } from '@nestjs/common';
import { RateLimitStoreError } from '../../../errors/rate-limit-store.error';
import { hashSlot } from '../cluster-slot';
import type { LuaScript } from '../redis-codec';
import { isNodeRedisCluster, type NodeRedisClientLike, type NodeRedisClusterLike } from '../../../interfaces/client-types';
import { isNoScript, untilReady, type RedisScriptTransport, type ScriptRunner } from './redis-transport';

/** What the transport reads of a node-redis cluster to follow a failover (see {@link NodeRedisTransport}). */
interface NodeRedisClusterState {
  slots: ReadonlyArray<{ master: { host: string; port: number; client?: { isReady: boolean } } } | undefined>;
  masters: ReadonlyArray<{ client?: { isReady: boolean } }>;
  /** node-redis's slot map keeper: `rediscover(client)` reloads the map through that node (`CLUSTER SLOTS`). */
  _slots?: { rediscover(startWith: unknown): Promise<unknown> };
}

/** Least interval between two slot-map reloads this transport asks for, ms. */
const REDISCOVER_INTERVAL_MS = 500;

/**
 * The node-redis v5 transport: `evalSha(sha, { keys, arguments })`, then `eval` on `NOSCRIPT`. node-redis pipelines
 * the commands of one tick itself; a cluster routes each call by its first key and follows `MOVED` / `ASK`.
 *
 * A node-redis cluster reloads its slot map only on `MOVED` / `ASK` (redis/node-redis#2806): when a master dies,
 * calls for its slots would wait in the offline queue of its connection, reconnecting forever, and never reach
 * the replica promoted in its place. So a call whose master is not connected fails at once, and asks node-redis
 * to reload the map through a master that is (at most every 500 ms): once the replica is promoted, the next
 * calls go to it.
 */
export class NodeRedisTransport implements RedisScriptTransport {
  readonly clientName = 'node-redis';
  readonly keyPrefix = '';
  readonly isCluster: boolean;
  private lastConnectionError: Error | undefined;
  private nextRediscovery = 0;

  constructor(private readonly client: NodeRedisClientLike) {
    this.isCluster = isNodeRedisCluster(client);
    if (!offlineQueueDisabled(client)) {
      new Logger('RateLimit').warn(
        'The node-redis client has its offline queue on: create it with disableOfflineQueue: true (for a cluster, ' +
          'defaults: { disableOfflineQueue: true }). With the queue, a command sent as the connection drops is ' +
          'written to the dead socket and still awaited, and node-redis 5 may then never become ready again after a restart.',
      );
    }
  }

  prepare(script: LuaScript): ScriptRunner {
    return (keys, args) => this.evalScript(script, keys, args);
  }

  evalScript({ lua, sha }: LuaScript, keys: string[], args: string[]): Promise<unknown> {
    // A call made while the client is down would wait in its offline queue and run after the reconnect, long
    // after the fallback answered its request (charging it then): it fails at once, as with ioredis clients we create.
    if (!this.connected()) return Promise.reject(this.connectionError());
    if (this.isCluster) {
      const down = this.masterDown(keys[0]);
      if (down) return Promise.reject(down);
    }
    const options = { keys, arguments: args };
    return this.client.evalSha(sha, options).catch((error: unknown) => {
      if (isNoScript(error)) return this.client.eval(lua, options);
      throw error;
    });
  }

  del(key: string): Promise<unknown> {
    return this.client.del(key);
  }

  async type(key: string): Promise<string> {
    return String(await this.client.type(key));
  }

  ping(): Promise<unknown> {
    return this.client.ping();
  }

  /**
   * Waits for the client's `ready` event, at most `timeoutMs`; false at once for a client that is not open (you
   * connect it before passing it in) or on a connection error that waiting will not cure.
   */
  async ready(timeoutMs: number): Promise<boolean> {
    if (this.connected()) return true;
    if (!this.client.isOpen) {
      this.noteConnection(new RateLimitStoreError('the node-redis client is not open: call connect() before passing it in'));
      return false;
    }
    return untilReady(this.client, timeoutMs, (error) => this.noteConnection(error));
  }

  noteConnection(error: Error | undefined): void {
    this.lastConnectionError = error;
  }

  connectionError(): Error | undefined {
    if (this.connected()) return undefined;
    const state = this.client.isOpen ? 'reconnecting' : 'closed';
    return this.lastConnectionError ?? new RateLimitStoreError(`not connected (node-redis client ${state})`);
  }

  /** From node-redis's slot map (`cluster.slots`), which it refreshes on `MOVED` and after a failover. */
  nodeOfSlot(slot: number): string | undefined {
    if (!this.isCluster) return undefined;
    const master = (this.client as NodeRedisClusterLike).slots[slot]?.master;
    return master && `${master.host}:${master.port}`;
  }

  /** A node-redis client is always the app's (this library creates only ioredis clients): nothing to close. */
  async close(): Promise<void> {}

  /** A client's connection is up (`isReady`); a cluster is open (its node connections reconnect on their own). */
  private connected(): boolean {
    return this.client.isReady ?? this.client.isOpen;
  }

  /** When the master of `key`'s slot is not connected: why, after asking for a slot-map reload. */
  private masterDown(key: string): Error | undefined {
    const cluster = this.client as unknown as NodeRedisClusterState;
    const master = cluster.slots[hashSlot(key)]?.master;
    if (!master?.client || master.client.isReady) return undefined;
    const now = performance.now();
    if (now >= this.nextRediscovery) {
      this.nextRediscovery = now + REDISCOVER_INTERVAL_MS;
      // Through a connected master: a reload through the dead one would fail and emit 'error' on the cluster.
      const through = cluster.masters.find((m) => m.client?.isReady)?.client;
      if (through) cluster._slots?.rediscover(through).catch(() => undefined);
    }
    return new RateLimitStoreError(`not connected (node-redis connection to ${master.host}:${master.port})`);
  }
}

/** Whether a node-redis client (its `options`) or cluster (its `_options.defaults`) was created with `disableOfflineQueue`. */
function offlineQueueDisabled(client: NodeRedisClientLike): boolean {
  const { options, _options } = client as {
    options?: { disableOfflineQueue?: boolean };
    _options?: { defaults?: { disableOfflineQueue?: boolean } };
  };
  return (options ?? _options?.defaults)?.disableOfflineQueue === true;
}
