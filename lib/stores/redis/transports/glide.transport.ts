import type { LuaScript } from '../redis-codec';
import { isGlideCluster, type GlideClientLike, type GlideScriptLike } from '../../../interfaces/client-types';
import { clientModule, type ClientPackage } from './client-module';
import type { RedisScriptTransport, ScriptRunner } from './redis-transport';

/** The part of `@valkey/valkey-glide` this transport uses: its `Script` class. */
interface GlideModule {
  Script: new (code: string) => GlideScriptLike;
}

const GLIDE: ClientPackage = {
  name: '@valkey/valkey-glide',
  label: 'Valkey GLIDE',
  clientClasses: ['GlideClient', 'GlideClusterClient', 'BaseClient'],
  member: 'Script',
};

/**
 * The Valkey GLIDE 2 transport: `invokeScript(script, { keys, args })`. GLIDE sends `EVALSHA` and, on
 * `NOSCRIPT`, loads the script (`SCRIPT LOAD`) and calls it again itself; a cluster client routes the call by its
 * first key. GLIDE keeps each script's code in native memory until it is released: one `Script` per script,
 * released on `close()`. Every call is also bounded by the client's own `requestTimeout` (250 ms by default).
 *
 * A `Script` keeps its code in the native state of the copy of GLIDE that created it, which is where the client
 * looks for it on `NOSCRIPT`: so scripts are created with the client's own copy (see {@link clientModule}), never
 * with another one installed beside it, whose scripts the client would never load.
 *
 * GLIDE exposes no slot map, so a GLIDE cluster has one store-error circuit for all its masters (it opens only
 * when no master answered a later call: see ResilientStore).
 */
export class GlideTransport implements RedisScriptTransport {
  readonly clientName = 'Valkey GLIDE';
  readonly keyPrefix = '';
  readonly isCluster: boolean;
  private readonly scripts = new Map<string, GlideScriptLike>();
  /** Why the client did not answer at startup, until a call succeeds (GLIDE reports no connection events). */
  private startupError: Error | undefined;

  /** @param glide the client's copy of `@valkey/valkey-glide` (loaded here only when a GLIDE client is passed in). */
  constructor(
    private readonly client: GlideClientLike,
    private readonly glide: GlideModule = clientModule<GlideModule>(client, GLIDE),
  ) {
    this.isCluster = isGlideCluster(client);
  }

  prepare(script: LuaScript): ScriptRunner {
    const glideScript = this.script(script);
    return (keys, args) => this.invoke(glideScript, keys, args);
  }

  evalScript(script: LuaScript, keys: string[], args: string[]): Promise<unknown> {
    return this.invoke(this.script(script), keys, args);
  }

  del(key: string): Promise<unknown> {
    return this.client.del([key]);
  }

  async type(key: string): Promise<string> {
    return String(await this.client.type(key));
  }

  ping(): Promise<unknown> {
    return this.client.ping();
  }

  /** A `PING` within `timeoutMs` (GLIDE connects when the client is created, and reconnects on its own). */
  async ready(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    const pinged = this.client.ping().then(
      () => {
        this.startupError = undefined;
        return true;
      },
      (error: unknown) => {
        this.startupError = error instanceof Error ? error : new Error(String(error));
        return false;
      },
    );
    try {
      return await Promise.race([pinged, expired]);
    } finally {
      clearTimeout(timer);
    }
  }

  noteConnection(error: Error | undefined): void {
    this.startupError = error;
  }

  connectionError(): Error | undefined {
    return this.startupError;
  }

  nodeOfSlot(): undefined {
    return undefined;
  }

  /** Releases the scripts' native copies; the client is the app's (this library creates only ioredis clients). */
  async close(): Promise<void> {
    for (const script of this.scripts.values()) script.release();
    this.scripts.clear();
  }

  private invoke(script: GlideScriptLike, keys: string[], args: string[]): Promise<unknown> {
    const reply = this.client.invokeScript(script, { keys, args });
    if (this.startupError === undefined) return reply;
    return reply.then((value) => {
      this.startupError = undefined;
      return value;
    });
  }

  /** One GLIDE `Script` per script (by SHA), kept until `close()`. */
  private script({ lua, sha }: LuaScript): GlideScriptLike {
    let script = this.scripts.get(sha);
    if (!script) {
      script = new this.glide.Script(lua);
      this.scripts.set(sha, script);
    }
    return script;
  }
}
