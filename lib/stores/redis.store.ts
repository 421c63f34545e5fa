import type { Cluster, Redis } from 'ioredis';
import type { RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import { composeDecideScript } from './redis-scripts';
import {
  MAX_POLICIES_PER_DECISION,
  type DecisionMode,
  type RateLimitCall,
  type RateLimitStore,
  type StoreDecision,
  type StoreVerdict,
  type VerdictReason,
} from './store.interface';

/** A standalone client or a cluster: both route a script call by its first key. */
export type RedisClient = Redis | Cluster;

type ScriptCommand = (...keysAndArgs: Array<string | number>) => Promise<unknown>;

const MODE_CODE = { consume: 'c', peek: 'p' } as const;
const REPLY_PER_CALL = 6;
const KEYS_PER_CALL = 2;

/**
 * The Redis store: every decision is one `EVALSHA` of a script registered with ioredis `defineCommand`
 * (after `SCRIPT FLUSH`, a restart or a failover, ioredis follows the `NOSCRIPT` reply with one `EVAL`;
 * nothing ran, so nothing counts twice). All keys of a decision share one hash tag, so it runs unchanged
 * on Redis Cluster.
 *
 * Every command has a fixed number of keys so that its first argument is a key: ioredis's auto-pipelining
 * on a Cluster groups custom commands by their first argument. So there is one lean command per algorithm
 * for the usual single-policy decision, and one per policy count for the script holding every algorithm.
 * All are defined up front: an auto-pipeline only knows the commands defined when it was created.
 */
export class RedisStore implements RateLimitStore {
  private readonly single = new Map<string, ScriptCommand>();
  /** `multi[n]` decides n policies of any algorithms. */
  private readonly multi: ScriptCommand[] = [];

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
      this.single.set(algorithm.name, this.define(`rlDecide_${algorithm.keyTag}`, composeDecideScript([algorithm]), 1));
    }
    const all = composeDecideScript(algorithms);
    for (let n = 1; n <= MAX_POLICIES_PER_DECISION; n++) this.multi[n] = this.define(`rlDecideAll_${n}`, all, n);
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

  /** Waits for the client to be connected (`ready`), at most `timeoutMs`; true when it is. */
  async ready(timeoutMs: number): Promise<boolean> {
    if (this.client.status === 'ready') return true;
    return new Promise<boolean>((resolve) => {
      const done = (connected: boolean) => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        resolve(connected);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.client.on('ready', onReady);
    });
  }

  async close(): Promise<void> {
    if (this.owned) await this.client.quit().catch(() => this.client.disconnect());
  }

  private async run(calls: readonly RateLimitCall[], mode: string): Promise<unknown> {
    const keys: string[] = [];
    const args: Array<string | number> = [mode];
    for (const call of calls) {
      const { algorithm, params } = call;
      keys.push(call.stateKey, call.blockKey);
      args.push(algorithm.id, call.cost, params.limit, params.windowMs, params.burst, call.blockForMs, call.token);
    }
    const command = (calls.length === 1 && this.single.get(calls[0].algorithm.name)) || this.multi[calls.length];
    if (!command) {
      throw new RateLimitStoreError(
        `A decision covers ${calls.length} policies of one tracker; at most ${MAX_POLICIES_PER_DECISION} are supported.`,
      );
    }
    try {
      return await command(...keys, ...args);
    } catch (error) {
      if (error instanceof Error && error.message.includes('WRONGTYPE')) throw await this.explainWrongType(calls, error);
      throw error;
    }
  }

  private define(name: string, lua: string, policies: number): ScriptCommand {
    this.client.defineCommand(name, { lua, numberOfKeys: policies * KEYS_PER_CALL });
    return (this.client as unknown as Record<string, ScriptCommand>)[name].bind(this.client);
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
