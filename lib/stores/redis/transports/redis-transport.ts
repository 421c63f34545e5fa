import type { LuaScript } from '../redis-codec';
import { isDefiniteConnectionError } from '../../store-description';

/** Runs one script with the number of keys it was prepared for; resolves to the script's reply. */
export type ScriptRunner = (keys: string[], args: string[]) => Promise<unknown>;

/** One script call of a pipeline. */
export interface ScriptCall {
  script: LuaScript;
  keys: string[];
  args: string[];
}

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
  /** Whether the client is a cluster client. */
  readonly isCluster: boolean;
  /**
   * What the client puts before every declared key (ioredis's `keyPrefix`; '' for the others): a script across
   * slots passes most of its keys as arguments, which the client leaves alone.
   */
  readonly keyPrefix: string;
  /**
   * Readies `script` for calls with `numberOfKeys` keys, up front (ioredis defines a command: an auto-pipeline
   * only knows the commands defined when it was created). `name` is unique per script and key count.
   */
  prepare(script: LuaScript, numberOfKeys: number, name: string): ScriptRunner;
  /** One call of `script` with any number of keys, sent at once (a batch of decisions on a standalone server). */
  evalScript(script: LuaScript, keys: string[], args: string[]): Promise<unknown>;
  /**
   * On a cluster, several script calls whose keys one master serves, each its own `EVALSHA`, written to it at
   * once (a pipeline: for servers that cannot run a script across slots); resolves with each call's error or
   * reply, in order (a `NOSCRIPT` or a redirection is returned, not followed). Absent: each call is sent alone.
   */
  pipeline?(calls: readonly ScriptCall[]): Promise<Array<[Error | null, unknown]>>;
  /**
   * On a cluster, one call declaring no key, on the connection to master `node` (`host:port`, as
   * {@link nodeOfSlot} names it): no `MOVED` or `ASK` can send it elsewhere. Undefined when the client cannot
   * (no such connection, or no way to reach one master); the caller then routes the call by a key.
   */
  evalOnNode?(node: string, script: LuaScript, args: string[]): Promise<unknown> | undefined;
  /**
   * On a cluster, every master the client knows (`host:port`, as {@link nodeOfSlot} names them), each reachable
   * through {@link evalOnNode}. Absent: the client cannot send a call to each master on its own.
   */
  masters?(): string[];
  /**
   * On a standalone server, one call of function `name` (`FCALL`) of a library loaded with {@link loadLibrary}:
   * through the client's auto-pipeline when `pipelined` (as a prepared script's), else written at once (as
   * {@link evalScript}). Absent: the client calls no functions (the store sends scripts).
   */
  fcall?(name: string, keys: string[], args: string[], pipelined: boolean): Promise<unknown>;
  /** On a standalone server, `FUNCTION LOAD REPLACE` of a library's `code`. Absent with {@link fcall}. */
  loadLibrary?(code: string): Promise<unknown>;
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

/** Whether a function call failed because the server does not have the function (nothing ran). */
export function isNoFunction(error: unknown): boolean {
  return error instanceof Error && error.message.includes('Function not found');
}

/** Whether a script call failed because the server does not have the script (nothing ran). */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.includes('NOSCRIPT');
}

/** A client that says when it is connected: ioredis and node-redis both emit `ready` and `error`. */
interface ReadyEmitter {
  on(event: 'ready' | 'error', listener: (arg?: unknown) => void): unknown;
  off(event: 'ready' | 'error', listener: (arg?: unknown) => void): unknown;
}

/**
 * Resolves true on the client's next `ready`, false after `timeoutMs` or at once on a connection error that
 * waiting will not cure (refused, unknown host, bad credentials or TLS), so an app whose Redis is missing
 * starts at once while the client keeps reconnecting. `note` hears every error (and `undefined` on ready), so
 * the startup warning can name the cause, also for a client passed in, which has no listener of ours otherwise.
 */
export function untilReady(client: ReadyEmitter, timeoutMs: number, note: (error: Error | undefined) => void): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const done = (connected: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      client.off('error', onError);
      resolve(connected);
    };
    const onReady = () => {
      note(undefined);
      done(true);
    };
    const onError = (error: unknown) => {
      // Duck-typed: a socket error may come from another realm (Node's own), where instanceof Error fails.
      if (typeof (error as Error | undefined)?.message !== 'string') return;
      note(error as Error);
      if (isDefiniteConnectionError(error as Error)) done(false);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on('ready', onReady);
    client.on('error', onError);
  });
}

/**
 * Whether `error` is the server's own error reply (the server answered), whichever client carried it: ioredis's
 * `ReplyError`, node-redis's `ErrorReply` (its `SimpleError`, `BlobError`), GLIDE's plain `RequestError` (its
 * `TimeoutError`, `ConnectionError`, … subclasses are the client's own failures). Told by class name: the
 * client libraries are optional peers, not imported here.
 */
export function isServerReply(error: Error): boolean {
  if (error.constructor?.name === 'RequestError') return true;
  for (let proto: unknown = Object.getPrototypeOf(error); proto && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
    const name = (proto as { constructor?: { name?: string } }).constructor?.name;
    if (name === 'ReplyError' || name === 'ErrorReply') return true;
  }
  return false;
}
