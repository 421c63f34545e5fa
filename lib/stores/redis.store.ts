import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import { composeDecideScript } from './redis-scripts';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision, StoreVerdict, VerdictReason } from './store.interface';

/** A standalone client or a cluster: both route a script call by its first key. */
export type RedisClient = Redis | Cluster;

/** A decision script: its source and SHA1 (its name in Redis's script cache). */
interface Script {
  lua: string;
  sha: string;
}

const MODE_CODE = { consume: 'c', peek: 'p' } as const;
const REPLY_PER_CALL = 6;
/**
 * The Redis store: every decision is one `EVALSHA` (after `SCRIPT FLUSH`, a restart or a failover, the
 * `NOSCRIPT` reply is followed by one `EVAL` that reloads the script; nothing ran, so nothing counts twice).
 * All keys of a decision share one hash tag, so it runs unchanged on Redis Cluster. Plain `EVALSHA`, not
 * ioredis `defineCommand`: ioredis knows where EVALSHA's keys are, so its auto-pipelining on a Cluster
 * groups decisions by their slot; a defined command with a variable number of keys is grouped by its first
 * argument (the key count), and the cluster then refuses the mixed pipeline.
 */
export class RedisStore implements RateLimitStore {
  private readonly scriptOf = new Map<RateLimitAlgorithm, Script>();
  /** The script that holds every algorithm, for routes whose policies mix algorithms. */
  private readonly all: Script;

  /**
   * @param client an ioredis client or cluster.
   * @param algorithms the algorithms whose scripts to register.
   * @param owned whether `close()` quits the client (only for clients this library created).
   */
  constructor(
    readonly client: RedisClient,
    algorithms: readonly RateLimitAlgorithm[],
    private readonly owned: boolean,
  ) {
    for (const algorithm of algorithms) this.scriptOf.set(algorithm, script(composeDecideScript([algorithm])));
    this.all = script(composeDecideScript(algorithms));
  }

  async decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    const reply = (await this.run(calls, MODE_CODE[mode])) as number[];
    const verdicts: StoreVerdict[] = [];
    for (let i = 0; i < calls.length; i++) {
      const b = 2 + i * REPLY_PER_CALL;
      verdicts.push({
        allowed: reply[b] === 1,
        remaining: reply[b + 1],
        resetMs: reply[b + 2],
        retryAfterMs: reply[b + 3],
        delayMs: reply[b + 4],
        reason: reply[b + 5] as VerdictReason,
      });
    }
    return { nowMs: reply[0], allowed: reply[1] === 1, verdicts };
  }

  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    await this.run(calls, 'r');
  }

  async block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    await this.run(
      calls.map((call) => ({ ...call, blockForMs: ms })),
      'b',
    );
  }

  async delete(keys: readonly string[]): Promise<void> {
    // One DEL per key: keys of different trackers may live in different cluster slots.
    await Promise.all(keys.map((key) => this.client.del(key)));
  }

  async close(): Promise<void> {
    if (this.owned) await this.client.quit().catch(() => this.client.disconnect());
  }

  private async run(calls: readonly RateLimitCall[], mode: string): Promise<unknown> {
    const keys: string[] = [];
    const args: Array<string | number> = [mode, calls.length];
    for (const call of calls) {
      const { algorithm, params } = call;
      keys.push(call.stateKey, call.blockKey);
      args.push(algorithm.id, call.cost, params.limit, params.windowMs, params.burst, call.blockForMs, call.token);
    }
    const single = calls.every((c) => c.algorithm === calls[0].algorithm) ? this.scriptOf.get(calls[0].algorithm) : undefined;
    const { lua, sha } = single ?? this.all;
    try {
      try {
        return await this.client.evalsha(sha, keys.length, ...keys, ...args);
      } catch (error) {
        if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
        return await this.client.eval(lua, keys.length, ...keys, ...args);
      }
    } catch (error) {
      if (error instanceof Error && error.message.includes('WRONGTYPE')) throw await this.explainWrongType(calls, error);
      throw error;
    }
  }

  /** Names the key that holds someone else's data, so the operator can fix the prefix. */
  private async explainWrongType(calls: readonly RateLimitCall[], cause: Error): Promise<Error> {
    for (const call of calls) {
      for (const [key, expected] of [
        [call.stateKey, call.algorithm.redisType],
        [call.blockKey, 'string'],
      ] as const) {
        const type = await this.client.type(key);
        if (type !== 'none' && type !== expected) {
          return new RateLimitStoreError(
            `Redis key "${key}" holds a ${type}, but ${call.algorithm.name} keeps a ${expected} there: another ` +
              `application writes under this prefix. Give the rate limiter its own 'prefix' or delete the key.`,
            { cause },
          );
        }
      }
    }
    return cause;
  }
}

function script(lua: string): Script {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}
