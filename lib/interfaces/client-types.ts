import type { Cluster, Redis } from 'ioredis';

/**
 * These types describe the part of each client library the store uses, structurally: the main entry point
 * never imports `redis` or `@valkey/valkey-glide` (optional peers), so an app without them compiles and runs.
 */

/** The keys and arguments of a node-redis script call. */
export interface NodeRedisScriptOptions {
  keys: string[];
  arguments: string[];
}

/**
 * A node-redis v5 client or cluster (`createClient()`, `createCluster()` of the `redis` package), connected by you
 * (`await client.connect()`) and never closed by this library.
 */
export interface NodeRedisClientLike {
  evalSha(sha1: string, options: NodeRedisScriptOptions): Promise<unknown>;
  eval(script: string, options: NodeRedisScriptOptions): Promise<unknown>;
  del(key: string): Promise<unknown>;
  type(key: string): Promise<unknown>;
  ping(): Promise<unknown>;
  /** Whether `connect()` was called and `close()`/`destroy()` not yet. */
  readonly isOpen: boolean;
  /** A client's: whether its connection is up (a cluster has none). */
  readonly isReady?: boolean;
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
}

/** A node-redis cluster (`createCluster()`): its slot map names the master of each slot. */
export interface NodeRedisClusterLike extends NodeRedisClientLike {
  readonly slots: ReadonlyArray<{ master: { host: string; port: number } } | undefined>;
  readonly masters: readonly unknown[];
}

/** A Valkey GLIDE script (`new Script(code)` of `@valkey/valkey-glide`). */
export interface GlideScriptLike {
  getHash(): string;
  release(): void;
}

/**
 * A Valkey GLIDE 2 client or cluster client (`GlideClient.createClient()`, `GlideClusterClient.createClient()` of
 * `@valkey/valkey-glide`), never closed by this library.
 */
export interface GlideClientLike {
  invokeScript(script: GlideScriptLike, options?: { keys?: string[]; args?: string[] }): Promise<unknown>;
  customCommand(args: string[]): Promise<unknown>;
  del(keys: string[]): Promise<unknown>;
  type(key: string): Promise<unknown>;
  ping(): Promise<unknown>;
  close(errorMessage?: string): void;
}

/** Any client the Redis store accepts: ioredis `Redis` / `Cluster`, node-redis client / cluster, Valkey GLIDE client / cluster client. */
export type RedisClient = Redis | Cluster | NodeRedisClientLike | GlideClientLike;

/** An ioredis `Redis` or `Cluster` (duck-typed, so a second copy of ioredis in node_modules still works). */
export function isIoredisClient(value: unknown): value is Redis | Cluster {
  const candidate = value as Partial<Redis> | null;
  return typeof candidate?.defineCommand === 'function' && typeof candidate?.evalsha === 'function';
}

/** A node-redis v5 client or cluster. */
export function isNodeRedisClient(value: unknown): value is NodeRedisClientLike {
  const candidate = value as Partial<NodeRedisClientLike> | null;
  return typeof candidate?.evalSha === 'function' && typeof candidate?.isOpen === 'boolean';
}

/** A node-redis cluster: it has a slot map and masters. */
export function isNodeRedisCluster(value: NodeRedisClientLike): value is NodeRedisClusterLike {
  return 'masters' in value && 'slots' in value;
}

/** A Valkey GLIDE client or cluster client. */
export function isGlideClient(value: unknown): value is GlideClientLike {
  const candidate = value as Partial<GlideClientLike> | null;
  return typeof candidate?.invokeScript === 'function' && typeof candidate?.customCommand === 'function';
}

/** A GLIDE cluster client: only it routes scripts explicitly (`invokeScriptWithRoute`). */
export function isGlideCluster(value: GlideClientLike): boolean {
  return typeof (value as { invokeScriptWithRoute?: unknown }).invokeScriptWithRoute === 'function';
}

/** Whether `value` is a client of any supported library (rather than a URL or ioredis options). */
export function isRedisClient(value: unknown): value is RedisClient {
  return isIoredisClient(value) || isNodeRedisClient(value) || isGlideClient(value);
}
