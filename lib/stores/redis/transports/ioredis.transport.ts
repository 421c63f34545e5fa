import type * as Ioredis from 'ioredis';
import type { Cluster, Command, Redis, RedisOptions } from 'ioredis';
import { RateLimitStoreError } from '../../../errors/rate-limit-store.error';
import type { LuaScript } from '../redis-codec';
import { clientModule, type ClientPackage } from './client-module';
import { isNoScript, untilReady, type RedisScriptTransport, type ScriptCall, type ScriptRunner } from './redis-transport';

const IOREDIS: ClientPackage = { name: 'ioredis', label: 'ioredis', clientClasses: ['Redis', 'Cluster'], member: 'Command' };

/** A defined command; ioredis flattens array arguments (no spreading of long lists per call). */
type ScriptCommand = (...keysAndArgs: Array<string | number | Array<string | number>>) => Promise<unknown>;

/**
 * The ioredis transport. Prepared scripts are commands defined with ioredis (`defineCommand`: `EVALSHA`, then
 * `EVAL` on `NOSCRIPT`), each with a fixed number of keys so that its first argument is a key: ioredis's
 * auto-pipelining on a Cluster groups custom commands by their first argument. A batch is written straight to
 * the connection as a `Command` (auto-pipelining would hold it for another turn and send one pipeline at a
 * time), so several batches can be in flight.
 */
export class IoredisTransport implements RedisScriptTransport {
  readonly clientName = 'ioredis';
  private lastConnectionError: Error | undefined;
  /**
   * The `Command` of the client's own copy of ioredis (see {@link clientModule}: a client created by another copy
   * installed beside ours gets its commands from its copy), loaded with the transport: an app on the memory store
   * never loads ioredis.
   */
  private readonly Command: typeof Command;

  constructor(private readonly client: Redis | Cluster) {
    this.Command = clientModule<typeof Ioredis>(client, IOREDIS).Command;
  }

  get isCluster(): boolean {
    return this.client.isCluster;
  }

  get keyPrefix(): string {
    return this.client.options.keyPrefix ?? '';
  }

  prepare({ lua }: LuaScript, numberOfKeys: number, name: string): ScriptRunner {
    this.client.defineCommand(name, { lua, numberOfKeys });
    // Called as command(keys, args): ioredis flattens the two arrays.
    return (this.client as unknown as Record<string, ScriptCommand>)[name].bind(this.client) as ScriptRunner;
  }

  /** `EVALSHA`, then `EVAL` if Redis does not have the script. Keys get the client's `keyPrefix`, as with defined commands. */
  evalScript(script: LuaScript, keys: string[], args: string[]): Promise<unknown> {
    return this.evalWith(this.client as Redis, script, keys, args);
  }

  /**
   * On a Cluster, a call of no declared keys on the connection to master `node` (`host:port`, as the slot map
   * names it), so no redirection moves it elsewhere; undefined when the client has no connection to that master.
   */
  evalOnNode(node: string, script: LuaScript, args: string[]): Promise<unknown> | undefined {
    if (!this.client.isCluster) return undefined;
    const master = (this.client as Cluster).nodes('master').find(({ options }) => `${options.host}:${options.port}` === node);
    return master && this.evalWith(master, script, [], args);
  }

  masters(): string[] {
    if (!this.client.isCluster) return [];
    return (this.client as Cluster).nodes('master').map(({ options }) => `${options.host}:${options.port}`);
  }

  private evalWith(client: Redis, { lua, sha }: LuaScript, keys: string[], args: string[]): Promise<unknown> {
    const send = (name: 'evalsha' | 'eval', script: string): Promise<unknown> => {
      const command = new this.Command(name, [script, keys.length, keys, args], {
        keyPrefix: client.options.keyPrefix,
        replyEncoding: 'utf8',
      });
      void client.sendCommand(command);
      return command.promise;
    };
    return send('evalsha', sha).catch((error: unknown) => {
      if (isNoScript(error)) return send('eval', lua);
      throw error;
    });
  }

  /** On a Cluster whose servers cannot run a script across slots: each master gets its decisions in one write. */
  async pipeline(calls: readonly ScriptCall[]): Promise<Array<[Error | null, unknown]>> {
    const pipeline = this.client.pipeline();
    for (const { script, keys, args } of calls) pipeline.evalsha(script.sha, keys.length, ...keys, ...args);
    return (await pipeline.exec()) ?? [];
  }

  fcall(name: string, keys: string[], args: string[], pipelined: boolean): Promise<unknown> {
    if (pipelined) return (this.client as Redis).fcall(name, keys.length, ...keys, ...args);
    const command = new this.Command('fcall', [name, keys.length, keys, args], {
      keyPrefix: this.client.options.keyPrefix,
      replyEncoding: 'utf8',
    });
    void this.client.sendCommand(command);
    return command.promise;
  }

  loadLibrary(code: string): Promise<unknown> {
    return (this.client as Redis).function('LOAD', 'REPLACE', code);
  }

  del(key: string): Promise<unknown> {
    return this.client.del(key);
  }

  type(key: string): Promise<string> {
    return this.client.type(key);
  }

  ping(): Promise<unknown> {
    return this.client.ping();
  }

  /**
   * Waits for `ready`, at most `timeoutMs`. Ends early, false, on a connection error that waiting will not cure
   * (refused, unknown host, bad credentials or TLS), so an app whose Redis is missing starts at once; the client
   * keeps reconnecting in the background.
   */
  async ready(timeoutMs: number): Promise<boolean> {
    if (this.client.status === 'ready') return true;
    return untilReady(this.client, timeoutMs, (error) => this.noteConnection(error));
  }

  noteConnection(error: Error | undefined): void {
    this.lastConnectionError = error;
  }

  /** The last connection error, or the client's status; `undefined` while it is connected. */
  connectionError(): Error | undefined {
    const { status } = this.client;
    if (status === 'ready') return undefined;
    return this.lastConnectionError ?? new RateLimitStoreError(`not connected (client status: ${status})`);
  }

  /** From ioredis's slot map: a failover changes it with the map. */
  nodeOfSlot(slot: number): string | undefined {
    return this.isCluster ? (this.client as Cluster).slots[slot]?.[0] : undefined;
  }

  async close(owned: boolean): Promise<void> {
    if (!owned) return;
    // A Sentinel client's failover-detector connections close on disconnect() only (quit() leaves them open, and
    // the process with them); any other client quits, so decisions in flight still get their replies.
    if ((this.client.options as RedisOptions).sentinels?.length) this.client.disconnect();
    else await this.client.quit().catch(() => this.client.disconnect());
  }
}

/** ioredis, required when first needed (see {@link IoredisTransport.Command}). */
export function loadIoredis(): typeof Ioredis {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only once Redis is configured
  return require('ioredis') as typeof Ioredis;
}
