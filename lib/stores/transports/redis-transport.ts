import type { LuaScript } from '../redis-codec';

/** Runs one script with the number of keys it was prepared for; resolves to the script's reply. */
export type ScriptRunner = (keys: string[], args: string[]) => Promise<unknown>;

/**
 * What {@link RedisStore} needs from a Redis client, one implementation per client library (ioredis, node-redis,
 * Valkey GLIDE). The store keeps the decision logic (batching, reply settling, errors); a transport only moves a
 * script call to the server and back, and answers for its client's connection.
 *
 * Every script call goes by SHA (`EVALSHA`) and recovers from `NOSCRIPT` (a flush, a restart, a failover, or a
 * server that evicts its script cache) by sending the script once more: nothing ran, so nothing counts twice.
 * On a cluster, a call goes to the master of its first key's slot (all keys of one decision share a hash tag).
 */
export interface RedisScriptTransport {
  /** The client library, as log lines name it: `ioredis`, `node-redis`, `Valkey GLIDE`. */
  readonly clientName: string;
  /** Whether the client is a cluster client (one call per decision: a call cannot span slots). */
  readonly isCluster: boolean;
  /**
   * Readies `script` for calls with `numberOfKeys` keys, up front (ioredis defines a command: an auto-pipeline
   * only knows the commands defined when it was created). `name` is unique per script and key count.
   */
  prepare(script: LuaScript, numberOfKeys: number, name: string): ScriptRunner;
  /** One call of `script` with any number of keys, sent at once (a batch of decisions on a standalone server). */
  evalScript(script: LuaScript, keys: string[], args: string[]): Promise<unknown>;
  del(key: string): Promise<unknown>;
  /** Redis `TYPE` of `key` (`none` when absent). */
  type(key: string): Promise<string>;
  ping(): Promise<unknown>;
  /**
   * Resolves true once the client is connected, false after `timeoutMs` or at once on a connection error that
   * waiting will not cure.
   */
  ready(timeoutMs: number): Promise<boolean>;
  /** Why the client is not connected, when it knows; `undefined` while it is connected. */
  connectionError(): Error | undefined;
  /** Remembers the client's last connection error (its `error` event); `undefined` once it is connected. */
  noteConnection(error: Error | undefined): void;
  /** The master serving `slot`, `host:port`, from the client's slot map; undefined without one. */
  nodeOfSlot(slot: number): string | undefined;
  /** Releases what the transport holds; quits the client only when `owned` (this library created it). */
  close(owned: boolean): Promise<void>;
}

/** Whether a script call failed because the server does not have the script (nothing ran). */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.includes('NOSCRIPT');
}
