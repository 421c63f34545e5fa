import { createHash } from 'node:crypto';
import { Command, type Cluster, type Redis, type RedisOptions } from 'ioredis';
import type { RateLimitAlgorithm } from '../algorithms/algorithm.interface';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import { composeDecideScript } from './redis-scripts';
import { isDefiniteConnectionError } from './store-description';
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

/** A script reply: integers, and an error message in the place of a decision that failed. */
type Reply = ReadonlyArray<number | string>;

/** A defined command; ioredis flattens array arguments (no spreading of long lists per call). */
type ScriptCommand = (...keysAndArgs: Array<string | number | Array<string | number>>) => Promise<unknown>;

const MODE_CODE = { consume: 'c', peek: 'p' } as const;
const REPLY_PER_CALL = 6;
const KEYS_PER_CALL = 2;
/**
 * Most decisions in one batch call. A full batch leaves at once, so Redis decides it while Node is still
 * making the next (measured: 1.4 - 2x the decisions/s of one batch per tick at 64 callers); it also keeps one
 * script run short.
 */
export const MAX_BATCH = 32;

/** A decision script and its SHA-1 (the name `EVALSHA` calls it by). */
interface LuaScript {
  lua: string;
  sha: string;
}

function luaScript(lua: string): LuaScript {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

/** A decision waiting for the batch of its tick. */
interface Queued {
  calls: readonly RateLimitCall[];
  mode: DecisionMode;
  resolve(decision: StoreDecision): void;
  reject(error: unknown): void;
}

/**
 * The Redis store: every decision is one `EVALSHA` of a decision script (after `SCRIPT FLUSH`, a restart or
 * a failover, the `NOSCRIPT` reply is followed by one `EVAL`; nothing ran, so nothing counts twice). All keys
 * of a decision share one hash tag, so it runs unchanged on Redis Cluster.
 *
 * On a standalone Redis, decisions made in the same event-loop turn share one call (`batch`, on by default): the
 * script decides them one after the other, exactly as separate calls would, and Node and Redis pay the
 * per-command cost once per batch instead of once per decision. A batch leaves when it is full or when the
 * turn ends, written straight to the connection (auto-pipelining would hold it for another turn and send
 * one pipeline at a time), so several can be in flight; a lone decision goes the same way, with its
 * algorithm's lean script. A cluster cannot run keys of several slots in one script, so there every
 * decision is its own call, through ioredis.
 *
 * Every command defined with ioredis (decisions on a Cluster or with `batch` off, refunds, lockouts) has a
 * fixed number of keys so that its first argument is a key: ioredis's auto-pipelining on a Cluster groups
 * custom commands by their first argument. So there is one lean command per algorithm for the usual
 * single-policy call, and one per policy count for the script holding every algorithm. All are defined up
 * front: an auto-pipeline only knows the commands defined when it was created.
 */
export class RedisStore implements RateLimitStore {
  private readonly single = new Map<string, ScriptCommand>();
  /** `multi[n]` decides n policies of any algorithms. */
  private readonly multi: ScriptCommand[] = [];
  /** With batching (standalone Redis): each algorithm's lean script, and the one holding them all. */
  private readonly direct?: { lean: Map<string, LuaScript>; all: LuaScript };
  private queue: Queued[] = [];
  private lastConnectionError: Error | undefined;
  /** The last key {@link nodeOf} hashed, and its slot. */
  private lastSlotKey: string | undefined;
  private lastSlot = 0;

  /**
   * @param client an ioredis client or cluster.
   * @param algorithms the algorithms whose scripts to register.
   * @param owned whether `close()` quits the client (only for clients this library created).
   * @param batch whether decisions of one tick share a call; ignored (off) on a Cluster.
   */
  constructor(
    readonly client: RedisClient,
    algorithms: readonly RateLimitAlgorithm[],
    private readonly owned: boolean,
    batch = true,
  ) {
    const lean = new Map(algorithms.map((algorithm) => [algorithm.name, luaScript(composeDecideScript([algorithm]))]));
    const all = luaScript(composeDecideScript(algorithms));
    for (const { name, keyTag } of algorithms) this.single.set(name, this.define(`rlDecide_${keyTag}`, lean.get(name)!.lua, KEYS_PER_CALL));
    for (let n = 1; n <= MAX_POLICIES_PER_DECISION; n++) this.multi[n] = this.define(`rlDecideAll_${n}`, all.lua, n * KEYS_PER_CALL);
    if (batch && !client.isCluster) this.direct = { lean, all };
  }

  decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    return new Promise<StoreDecision>((resolve, reject) => {
      const queued: Queued = { calls, mode, resolve, reject };
      if (!this.direct || calls.length > MAX_POLICIES_PER_DECISION) {
        this.run(calls, MODE_CODE[mode])
          .then((reply) => this.settle([queued], reply as Reply))
          .catch(reject);
      } else {
        const waiting = this.queue.push(queued);
        if (waiting === MAX_BATCH) this.flush();
        // setImmediate, not nextTick: requests read from several sockets in one poll phase join one batch.
        else if (waiting === 1) setImmediate(() => this.flush());
      }
    });
  }

  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    await this.run(calls, 'r');
  }

  async penalize(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    const reply = (await this.run(calls, 'x')) as readonly (number | string)[];
    if (typeof reply[1] === 'string') throw await this.explain(calls, new RateLimitStoreError(`Redis failed the penalty: ${reply[1]}`));
    return parseDecision(reply as readonly number[], 1, calls.length);
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

  /**
   * Waits for the client to be connected (`ready`), at most `timeoutMs`; true when it is. Ends early, false,
   * on a connection error that waiting will not cure (refused, unknown host, bad credentials or TLS), so an
   * app whose Redis is missing starts at once; the client keeps reconnecting in the background.
   */
  async ready(timeoutMs: number): Promise<boolean> {
    if (this.client.status === 'ready') return true;
    return new Promise<boolean>((resolve) => {
      const done = (connected: boolean) => {
        clearTimeout(timer);
        this.client.off('ready', onReady);
        this.client.off('error', onError);
        resolve(connected);
      };
      const onReady = () => {
        this.noteConnection(undefined);
        done(true);
      };
      // Also for a client passed in, which has no listener of ours otherwise: the startup warning names the cause.
      const onError = (error: Error) => {
        this.noteConnection(error);
        if (isDefiniteConnectionError(error)) done(false);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      this.client.on('ready', onReady);
      this.client.on('error', onError);
    });
  }

  /**
   * The Cluster master serving `key`'s slot, as ioredis names it (`host:port`, from its slot map); undefined on
   * a standalone Redis, or while the slot map does not cover the slot. A failover changes it with the map.
   */
  nodeOf(key: string): string | undefined {
    if (!this.client.isCluster) return undefined;
    // One decision asks twice (the in-process check, then the call): its slot is hashed once.
    if (key !== this.lastSlotKey) {
      this.lastSlotKey = key;
      this.lastSlot = hashSlot(key);
    }
    return (this.client as Cluster).slots[this.lastSlot]?.[0];
  }

  /** Remembers the client's last connection error (its `error` event) for log lines; `undefined` once it is connected. */
  noteConnection(error: Error | undefined): void {
    this.lastConnectionError = error;
  }

  /** Why the client is not connected: its last connection error, or its status; `undefined` while it is connected. */
  connectionError(): Error | undefined {
    const { status } = this.client;
    if (status === 'ready') return undefined;
    return this.lastConnectionError ?? new RateLimitStoreError(`not connected (client status: ${status})`);
  }

  async close(): Promise<void> {
    if (!this.owned) return;
    // A Sentinel client's failover-detector connections close on disconnect() only (quit() leaves them open, and
    // the process with them); any other client quits, so decisions in flight still get their replies.
    if ((this.client.options as RedisOptions).sentinels?.length) this.client.disconnect();
    else await this.client.quit().catch(() => this.client.disconnect());
  }

  /**
   * Sends the decisions queued since the last batch left (at most {@link MAX_BATCH}) in one call: a lone
   * single-policy decision with its algorithm's lean script, anything else with the script holding them all.
   */
  private flush(): void {
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    const keys: string[] = [];
    const args: string[] = [];
    for (const { calls, mode } of batch) appendCall(keys, args, calls, MODE_CODE[mode]);
    const { lean, all } = this.direct!;
    const lone = batch.length === 1 && batch[0].calls.length === 1 ? lean.get(batch[0].calls[0].algorithm.name) : undefined;
    this.evalDirect(lone ?? all, keys, args)
      .then((reply) => this.settle(batch, reply as Reply))
      .catch((error: unknown) => {
        // The call failed as a whole (connection, timeout): whether it ran is unknown, so no decision is
        // retried (that could charge twice); each fails, as its own call would have.
        for (const q of batch) q.reject(error);
      });
  }

  /** Hands each decision of `batch` its part of the script's reply. */
  private settle(batch: readonly Queued[], reply: Reply): void {
    let offset = 1;
    for (const q of batch) {
      const flag = reply[offset];
      // A decision the script reported as failed has its message in place of its first status.
      if (typeof flag === 'string')
        this.explain(q.calls, new RateLimitStoreError(`Redis failed the decision: ${flag}`)).then(q.reject, q.reject);
      else q.resolve(parseDecision(reply as readonly number[], offset, q.calls.length));
      offset += q.calls.length * REPLY_PER_CALL;
    }
  }

  private async run(calls: readonly RateLimitCall[], mode: string): Promise<unknown> {
    const command = (calls.length === 1 && this.single.get(calls[0].algorithm.name)) || this.multi[calls.length];
    if (!command) {
      throw new RateLimitStoreError(
        `A decision covers ${calls.length} policies of one tracker; at most ${MAX_POLICIES_PER_DECISION} are supported.`,
      );
    }
    const keys: string[] = [];
    const args: string[] = [];
    appendCall(keys, args, calls, mode);
    try {
      return await command(keys, args);
    } catch (error) {
      throw error instanceof Error ? await this.explain(calls, error) : error;
    }
  }

  /**
   * Writes a script call straight to the connection: `EVALSHA`, then `EVAL` if Redis does not have the
   * script (`NOSCRIPT`: nothing ran). Keys get the client's `keyPrefix`, as with defined commands.
   */
  private evalDirect({ lua, sha }: LuaScript, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    const client = this.client as Redis;
    const send = (name: 'evalsha' | 'eval', script: string): Promise<unknown> => {
      const command = new Command(name, [script, keys.length, keys as string[], args as string[]], {
        keyPrefix: client.options.keyPrefix,
        replyEncoding: 'utf8',
      });
      void client.sendCommand(command);
      return command.promise;
    };
    return send('evalsha', sha).catch((error: unknown) => {
      if (error instanceof Error && error.message.includes('NOSCRIPT')) return send('eval', lua);
      throw error;
    });
  }

  private define(name: string, lua: string, numberOfKeys: number): ScriptCommand {
    this.client.defineCommand(name, { lua, numberOfKeys });
    return (this.client as unknown as Record<string, ScriptCommand>)[name].bind(this.client);
  }

  /** For a WRONGTYPE error, names the key that holds someone else's data, so the operator can fix the prefix. */
  private async explain(calls: readonly RateLimitCall[], cause: Error): Promise<Error> {
    if (!cause.message.includes('WRONGTYPE')) return cause;
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

/** CRC16-XMODEM (polynomial 0x1021), the checksum Redis Cluster hashes keys with. */
const CRC16_TABLE = Uint16Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  return crc & 0xffff;
});

function crc16(crc: number, byte: number): number {
  return ((crc << 8) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff]) & 0xffff;
}

/**
 * The Redis Cluster slot of `key`: CRC16 of its hash tag (what lies between the first `{` and the next `}`,
 * when not empty) or of the whole key, over the UTF-8 bytes ioredis sends (a lone surrogate as U+FFFD), mod
 * 16384. Computed on the string, without encoding it: it is on every Cluster decision's path.
 */
function hashSlot(key: string): number {
  let from = 0;
  let to = key.length;
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) {
      from = open + 1;
      to = close;
    }
  }
  let crc = 0;
  for (let i = from; i < to; i++) {
    let code = key.charCodeAt(i);
    if (code < 0x80) {
      crc = crc16(crc, code);
      continue;
    }
    if (code < 0x800) {
      crc = crc16(crc16(crc, 0xc0 | (code >> 6)), 0x80 | (code & 0x3f));
      continue;
    }
    if (code >= 0xd800 && code <= 0xdfff) {
      const low = i + 1 < to ? key.charCodeAt(i + 1) : 0;
      if (code <= 0xdbff && low >= 0xdc00 && low <= 0xdfff) {
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
        i++;
        crc = crc16(crc16(crc, 0xf0 | (code >> 18)), 0x80 | ((code >> 12) & 0x3f));
        crc = crc16(crc16(crc, 0x80 | ((code >> 6) & 0x3f)), 0x80 | (code & 0x3f));
        continue;
      }
      code = 0xfffd;
    }
    crc = crc16(crc16(crc16(crc, 0xe0 | (code >> 12)), 0x80 | ((code >> 6) & 0x3f)), 0x80 | (code & 0x3f));
  }
  return crc & 0x3fff;
}

/**
 * Appends one decision's keys, and its one argument, in the layout of algorithms/decide.lua: a JSON array of
 * the mode and seven values per policy (numbers are whole, so they print exactly).
 */
function appendCall(keys: string[], args: string[], calls: readonly RateLimitCall[], mode: string): void {
  let json = `["${mode}"`;
  for (const { algorithm, cost, params, blockForMs, token, stateKey, blockKey } of calls) {
    keys.push(stateKey, blockKey);
    json += `,${algorithm.id},${cost},${params.limit},${params.windowMs},${params.burst},${blockForMs},${token === '' ? '""' : JSON.stringify(token)}`;
  }
  args.push(`${json}]`);
}

/** One decision of a script reply: six integers per policy from `offset` (see algorithms/decide.lua). */
function parseDecision(reply: readonly number[], offset: number, policies: number): StoreDecision {
  const verdicts: StoreVerdict[] = [];
  let allowed = true;
  for (let i = 0; i < policies; i++) {
    const b = offset + i * REPLY_PER_CALL;
    const status = reply[b];
    if (status !== 0) allowed = false;
    verdicts.push({
      allowed: status === 0,
      remaining: reply[b + 1],
      resetMs: reply[b + 2],
      retryAfterMs: reply[b + 3],
      delayMs: reply[b + 4],
      moreQuotaMs: reply[b + 5],
      reason: (status === 0 ? 0 : status - 1) as VerdictReason,
    });
  }
  return { nowMs: reply[0], allowed, verdicts };
}
