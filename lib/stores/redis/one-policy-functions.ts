import type { RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import { composeOnePolicyLibrary, type OnePolicyLibrary } from './redis-scripts';
import { isNoFunction, isServerReply, type RedisScriptTransport, type ScriptRunner } from './transports/redis-transport';

/** After a load that failed on the way (not refused by the server), how long before the next try, ms. */
const RETRY_LOAD_MS = 5_000;

/**
 * The one-policy scripts as a Redis function library (`FCALL`), where the client and the server allow it: a
 * standalone Redis ≥ 7.0 through ioredis. A function's helpers were built when the library loaded, where an
 * `EVALSHA` builds them again on every call (bench/README.md, "Results for issue #39, second session").
 *
 * The library loads in the background on first use; decisions go by script meanwhile. A server that refuses
 * it (Redis 6 and KeyDB have no functions, an ACL without `FUNCTION LOAD`) is remembered, and decisions keep
 * going by script. A server that lost it (a restart without persistence, `FUNCTION FLUSH`) answers "Function not
 * found", nothing ran: that decision goes by script and the library loads again.
 */
export class OnePolicyFunctions {
  private readonly library: OnePolicyLibrary | undefined;
  private state: 'unloaded' | 'loading' | 'loaded' | 'refused' = 'unloaded';
  private retryAt = 0;

  constructor(
    private readonly transport: RedisScriptTransport,
    algorithms: readonly RateLimitAlgorithm[],
  ) {
    if (!transport.isCluster && transport.fcall && transport.loadLibrary) this.library = composeOnePolicyLibrary(algorithms);
  }

  /**
   * One decision of `algorithm`'s one-policy script as a function call (through the client's auto-pipeline when
   * `pipelined`), or `undefined` when it must go by script (no library, or not loaded yet: a load starts).
   * `byScript` sends it by script when the server lost the library (the caller's runner, made once, not per call).
   */
  call(algorithm: string, keys: string[], args: string[], pipelined: boolean, byScript: ScriptRunner): Promise<unknown> | undefined {
    if (this.state !== 'loaded') {
      this.load();
      return undefined;
    }
    return this.transport.fcall!(this.library!.functions.get(algorithm)!, keys, args, pipelined).catch((error: unknown) => {
      if (!isNoFunction(error)) throw error;
      this.state = 'unloaded';
      this.load();
      return byScript(keys, args);
    });
  }

  private load(): void {
    if (this.library === undefined || this.state !== 'unloaded' || performance.now() < this.retryAt) return;
    this.state = 'loading';
    this.transport.loadLibrary!(this.library.code).then(
      () => {
        this.state = 'loaded';
      },
      (error: unknown) => {
        const refused = error instanceof Error && isServerReply(error);
        this.state = refused ? 'refused' : 'unloaded';
        this.retryAt = performance.now() + RETRY_LOAD_MS;
      },
    );
  }
}
