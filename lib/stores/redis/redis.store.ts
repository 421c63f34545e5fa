import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import { RateLimitStoreError } from '../../errors/rate-limit-store.error';
import { hashSlot } from './cluster-slot';
import { luaScript, MODE_CODE, parseDecision } from './redis-codec';
import { ScriptDispatcher } from './script-dispatcher';
import { OUTAGE_REPLY } from './script-replies';
import { DENY_CHANNEL_KEEP_MS, MAX_DENIES, MAX_DENY_LOG } from '../deny-bounds';
import type {
  DecisionMode,
  DenyWrite,
  DenyWriteResult,
  InstanceHeartbeat,
  OverrideKeys,
  OverrideRead,
  OverrideWrite,
  OverrideWriteResult,
  RateLimitCall,
  RateLimitStore,
  StoreDecision,
} from '../store.interface';
import type { RedisClient } from '../../interfaces/client-types';
import { isServerReply, type RedisScriptTransport } from './transports/redis-transport';
import { transportFor } from './transports/transport-for';

export type { RedisClient } from '../../interfaces/client-types';
export { MAX_BATCH } from './script-dispatcher';

/** The runtime overrides' scripts (see their headers), read once. */
const WRITE_OVERRIDE = luaScript(readFileSync(join(__dirname, '..', '..', 'algorithms', 'overrides-write.lua'), 'utf8'));
const READ_OVERRIDES = luaScript(readFileSync(join(__dirname, '..', '..', 'algorithms', 'overrides-read.lua'), 'utf8'));
const WRITE_STATUS: ReadonlyArray<OverrideWriteResult['status']> = ['ok', 'past', 'full'];
/** The deny channel's write and the carry-over's scan (see their headers), read once. */
const WRITE_DENIES = luaScript(readFileSync(join(__dirname, '..', '..', 'algorithms', 'denies-write.lua'), 'utf8'));
const SCAN_LUA = readFileSync(join(__dirname, '..', '..', 'algorithms', 'denies-scan.lua'), 'utf8');
const SCAN_DENIES = luaScript(SCAN_LUA);
/** On a Cluster master: the keys SCAN finds are in many slots, all its own. */
const SCAN_DENIES_ON_NODE = luaScript(`#!lua flags=allow-cross-slot-keys\n${SCAN_LUA}`);
/** Keys a step of the carry-over's SCAN looks at. */
const SCAN_COUNT = '1000';

/**
 * The Redis store: every decision is one `EVALSHA` of a decision script (after `SCRIPT FLUSH`, a restart, a
 * failover or a server evicting its script cache, the `NOSCRIPT` reply is followed by the script once more: `EVAL`,
 * or `SCRIPT LOAD` with GLIDE; nothing ran, so nothing counts twice). All keys of a decision share one hash tag,
 * so it runs unchanged on Redis Cluster.
 *
 * With `batch` (on by default), decisions made in the same event-loop turn share a call: one per batch on a
 * standalone Redis, one per batch and master on a Cluster (see {@link ScriptDispatcher}, which sends every
 * script). The script decides them one after the other, exactly as separate calls would, and Node and Redis pay
 * the per-command cost once per batch instead of once per decision. The client library is behind a
 * {@link RedisScriptTransport}: ioredis, node-redis or Valkey GLIDE, told apart by shape.
 */
export class RedisStore implements RateLimitStore {
  /** The client library's side of every call. */
  private readonly transport: RedisScriptTransport;
  private readonly dispatcher: ScriptDispatcher;
  /** The last key {@link nodeOf} hashed, and its slot. */
  private lastSlotKey: string | undefined;
  private lastSlot = 0;

  /**
   * @param client an ioredis client or cluster, a node-redis 5 client or cluster, or a Valkey GLIDE 2 client or cluster client.
   * @param algorithms the algorithms whose scripts to register.
   * @param owned whether `close()` quits the client (only for clients this library created).
   * @param batch whether decisions of one turn share a call (on a Cluster: one call per master).
   */
  constructor(
    readonly client: RedisClient,
    algorithms: readonly RateLimitAlgorithm[],
    private readonly owned: boolean,
    batch = true,
  ) {
    const transport = (this.transport = transportFor(client));
    const batching = !batch ? 'none' : transport.isCluster ? 'per-master' : 'per-server';
    this.dispatcher = new ScriptDispatcher(transport, algorithms, batching, (key) => this.nodeOf(key));
  }

  /** Whether the client is a cluster client. */
  get isCluster(): boolean {
    return this.transport.isCluster;
  }

  decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    return this.dispatcher.decide(calls, MODE_CODE[mode]);
  }

  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    await this.dispatcher.sendOwnCall(calls, 'r');
  }

  async penalize(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    const reply = (await this.dispatcher.sendOwnCall(calls, 'x')) as readonly (number | string)[];
    if (typeof reply[1] === 'string')
      throw await this.dispatcher.explain(calls, new RateLimitStoreError(`Redis failed the penalty: ${reply[1]}`, { outage: false }));
    return parseDecision(reply as readonly number[], 1, calls.length);
  }

  async block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    await this.dispatcher.sendOwnCall(
      calls.map((call) => ({ ...call, blockForMs: ms })),
      'b',
    );
  }

  async delete(keys: readonly string[]): Promise<void> {
    // One DEL per key: keys of different trackers may live in different cluster slots.
    await Promise.all(keys.map((key) => this.transport.del(key)));
  }

  /** Runs overrides-write.lua: one call to the master of the overrides' slot. */
  async writeOverride(keys: OverrideKeys, { field, value, untilMs, maxCount }: OverrideWrite): Promise<OverrideWriteResult> {
    const reply = (await this.transport.evalScript(
      WRITE_OVERRIDE,
      [keys.overrides, keys.version, keys.expiries],
      [field, value ?? '', String(untilMs), String(maxCount)],
    )) as ReadonlyArray<number | string>;
    return { version: String(reply[0]), nowMs: Number(reply[1]), status: WRITE_STATUS[Number(reply[2])] ?? 'ok' };
  }

  /**
   * Runs overrides-read.lua: the version and `TIME`, the instance's heartbeat and the count of live instances,
   * and the whole hash only when the version moved.
   */
  async readOverrides(
    keys: OverrideKeys,
    knownVersion: string | undefined,
    heartbeat?: InstanceHeartbeat,
    knownDenies?: string,
  ): Promise<OverrideRead> {
    const d = keys.denies;
    const reply = (await this.transport.evalScript(
      READ_OVERRIDES,
      // Without a deny channel ('-'), its keys stand in for the unused deny keys: nothing reads them but the MGET.
      [
        keys.overrides,
        keys.version,
        keys.instances,
        d?.seq ?? keys.version,
        d?.denies ?? keys.overrides,
        d?.log ?? keys.instances,
        d?.carryOver ?? keys.version,
      ],
      [knownVersion ?? '', heartbeat?.id ?? '', String(heartbeat?.liveMs ?? 0), d === undefined ? '-' : (knownDenies ?? '')],
    )) as ReadonlyArray<number | string | ReadonlyArray<unknown>>;
    const read: OverrideRead = { version: String(reply[0]), nowMs: Number(reply[1]) };
    if (heartbeat !== undefined) read.liveInstances = Number(reply[2]);
    if (Array.isArray(reply[3])) read.entries = pairs(reply[3] as readonly unknown[]);
    if (d !== undefined) {
      read.denies = { seq: String(reply[4]), carryOver: String(reply[5]) };
      const changes = reply[6];
      if (Array.isArray(changes)) read.denies.changes = { complete: changes[0] === 1, entries: pairs(changes[1] as readonly unknown[]) };
    }
    return read;
  }

  /** Runs denies-write.lua: one call to the master of the overrides' slot. */
  async writeDenies(keys: OverrideKeys, write: DenyWrite): Promise<DenyWriteResult> {
    const d = keys.denies!;
    const args = [write.op, String(MAX_DENIES), String(MAX_DENY_LOG), String(DENY_CHANNEL_KEEP_MS)];
    if (write.op === 'deny') args.push(write.field, String(write.lengthMs), String(write.untilMs), write.reason);
    else if (write.op === 'allow') args.push(write.field);
    else if (write.op === 'import') args.push(write.since, ...write.entries.flat());
    else if (write.op === 'import-begin') args.push(String(write.everyMs), String(write.liveMs));
    else args.push(write.done ? 'done' : '');
    const reply = (await this.transport.evalScript(
      WRITE_DENIES,
      [d.seq, d.denies, d.log, d.ends, d.carryOver, keys.instances],
      args,
    )) as ReadonlyArray<number | string>;
    return { seq: String(reply[0]), nowMs: Number(reply[1]), status: Number(reply[2]), a: Number(reply[3]), b: String(reply[4] ?? '') };
  }

  /**
   * SCANs every master for 1.0 deny keys (`<prefix>:{<tracker>}:deny`), each step one call of denies-scan.lua
   * (on a Cluster, on the master's own connection), and hands each step's keys and values to `each`, without
   * the client's `keyPrefix`. False when a Cluster client cannot reach each master on its own.
   */
  async scanDenyKeys(prefix: string, each: (entries: Array<[string, string]>) => Promise<void>): Promise<boolean> {
    const { transport } = this;
    const nodes: ReadonlyArray<string | undefined> | undefined = transport.isCluster ? transport.masters?.() : [undefined];
    if (nodes === undefined) return false;
    const keyPrefix = transport.keyPrefix;
    const pattern = `${globEscaped(keyPrefix + prefix)}:{*}:deny`;
    const ours = new RegExp(`^${regExpEscaped(prefix)}:\\{[^{}]*\\}:deny$`);
    for (const node of nodes) {
      let cursor = '0';
      do {
        const args = [cursor, pattern, SCAN_COUNT];
        const sent =
          node === undefined ? transport.evalScript(SCAN_DENIES, [], args) : transport.evalOnNode?.(node, SCAN_DENIES_ON_NODE, args);
        if (sent === undefined) return false;
        const reply = (await sent) as [string, unknown[]];
        cursor = String(reply[0]);
        const found = pairs(reply[1]).map(([key, value]): [string, string] => [key.slice(keyPrefix.length), value]);
        await each(found.filter(([key]) => ours.test(key)));
      } while (cursor !== '0');
    }
    return true;
  }

  /** Redis `PING` (one node of a cluster). */
  async ping(): Promise<void> {
    await this.transport.ping();
  }

  /**
   * Waits for the client to be connected, at most `timeoutMs`; true when it is. Ends early, false, on a
   * connection error that waiting will not cure (refused, unknown host, bad credentials or TLS), so an app whose
   * Redis is missing starts at once; the client keeps reconnecting in the background.
   */
  ready(timeoutMs: number): Promise<boolean> {
    return this.transport.ready(timeoutMs);
  }

  /**
   * The Cluster master serving `key`'s slot (`host:port`, from the client's slot map); undefined on a standalone
   * Redis, for a client without a slot map (GLIDE), or while the map does not cover the slot. A failover changes
   * it with the map.
   */
  nodeOf(key: string): string | undefined {
    if (!this.transport.isCluster) return undefined;
    // One decision asks twice (the in-process check, then the call): its slot is hashed once.
    if (key !== this.lastSlotKey) {
      this.lastSlotKey = key;
      this.lastSlot = hashSlot(key);
    }
    return this.transport.nodeOfSlot(this.lastSlot);
  }

  /**
   * Whether a failure means Redis cannot serve now (see {@link RateLimitStoreError.outage}): no answer (connection,
   * timeout, a client-side error), or a reply that says the server or the slot is not serving (`CLUSTERDOWN`,
   * `TRYAGAIN`, `LOADING`, `MASTERDOWN`, `BUSY`, `READONLY`, `OOM`, an auth error). Any other reply is the
   * decision's own: Redis answered, and will answer the next one.
   */
  isOutage(error: unknown): boolean {
    if (error instanceof RateLimitStoreError) return error.outage;
    if (!(error instanceof Error) || !isServerReply(error)) return true;
    return OUTAGE_REPLY.test(error.message);
  }

  /** Remembers the client's last connection error (its `error` event) for log lines; `undefined` once it is connected. */
  noteConnection(error: Error | undefined): void {
    this.transport.noteConnection(error);
  }

  /** Why the client is not connected: its last connection error, or its status; `undefined` while it is connected. */
  connectionError(): Error | undefined {
    return this.transport.connectionError();
  }

  /** Releases what the transport holds; quits the client only if this library created it. */
  close(): Promise<void> {
    return this.transport.close(this.owned);
  }
}

/** `[a, b, c, d]` as `[[a, b], [c, d]]`, each a string. */
function pairs(flat: readonly unknown[]): Array<[string, string]> {
  const entries: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) entries.push([String(flat[i]), String(flat[i + 1])]);
  return entries;
}

/** `text` matching itself in a SCAN MATCH pattern. */
function globEscaped(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

function regExpEscaped(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
