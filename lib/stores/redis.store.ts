import type { Cluster, Redis } from 'ioredis';
import type { RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import { composeDecideScript } from './redis-scripts';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision, StoreVerdict, VerdictReason } from './store.interface';

/** A standalone client or a cluster: both route a script call by its first key. */
export type RedisClient = Redis | Cluster;

type ScriptCommand = (numKeys: number, ...keysAndArgs: Array<string | number>) => Promise<unknown>;

const MODE_CODE = { consume: 'c', peek: 'p' } as const;
const REPLY_PER_CALL = 6;
/** Name of the script that holds every algorithm, for routes whose policies mix algorithms. */
const ALL = 'rlDecideAll';

/**
 * The Redis store: every decision is one `EVALSHA` of a script registered once with `defineCommand`
 * (ioredis reloads it transparently after `SCRIPT FLUSH`, a restart or a failover). All keys of a
 * decision share one hash tag, so it runs unchanged on Redis Cluster.
 */
export class RedisStore implements RateLimitStore {
  private readonly commandOf = new Map<RateLimitAlgorithm, string>();

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
    for (const algorithm of algorithms) {
      const name = `rlDecide_${algorithm.keyTag}`;
      client.defineCommand(name, { lua: composeDecideScript([algorithm]) });
      this.commandOf.set(algorithm, name);
    }
    client.defineCommand(ALL, { lua: composeDecideScript(algorithms) });
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
    const name = calls.every((c) => c.algorithm === calls[0].algorithm) ? this.commandOf.get(calls[0].algorithm) : ALL;
    const command = (this.client as unknown as Record<string, ScriptCommand>)[name ?? ALL];
    try {
      return await command.call(this.client, keys.length, ...keys, ...args);
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
