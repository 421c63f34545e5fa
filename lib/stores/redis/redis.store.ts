import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import { RateLimitStoreError } from '../../errors/rate-limit-store.error';
import { hashSlot } from './cluster-slot';
import {
  DecideCall,
  decisionKeyCount,
  explainForeignData,
  isLone,
  loneCall,
  luaScript,
  MODE_CODE,
  parseDecision,
  parseLoneDecision,
  REPLY_PER_CALL,
  type LuaScript,
} from './redis-codec';
import { composeDecideScript, composeLoneScript } from './redis-scripts';
import {
  MAX_POLICIES_PER_DECISION,
  type DecisionMode,
  type InstanceHeartbeat,
  type OverrideKeys,
  type OverrideRead,
  type OverrideWrite,
  type OverrideWriteResult,
  type RateLimitCall,
  type RateLimitStore,
  type StoreDecision,
} from '../store.interface';
import type { RedisClient } from '../../interfaces/client-types';
import { isServerReply, type RedisScriptTransport, type ScriptRunner } from './transports/redis-transport';
import { transportFor } from './transports/transport-for';

export type { RedisClient } from '../../interfaces/client-types';

/** A script reply: integers, and an error message in the place of a decision that failed. */
type Reply = ReadonlyArray<number | string>;

/**
 * Most policy decisions in one batch call (a request of 8 policies counts 8). A full batch leaves at once, so
 * Redis decides it while Node is still making the next (measured: 1.4 - 2x the decisions/s of one batch per
 * tick at 64 callers); counting policies, not requests, keeps one script run short whatever the policy count
 * (32 requests of 8 policies held Redis 1.3 - 2.4 ms per run, and everyone else with it).
 */
export const MAX_BATCH = 32;

/** The runtime overrides' scripts (see their headers), read once. */
const WRITE_OVERRIDE = luaScript(readFileSync(join(__dirname, 'writeOverride-3.lua'), 'utf8'));
const READ_OVERRIDES = luaScript(readFileSync(join(__dirname, 'readOverrides-3.lua'), 'utf8'));
const WRITE_STATUS: ReadonlyArray<OverrideWriteResult['status']> = ['ok', 'past', 'full'];

/** A decision waiting for the batch of its tick. */
interface Queued {
  calls: readonly RateLimitCall[];
  mode: DecisionMode;
  resolve(decision: StoreDecision): void;
  reject(error: unknown): void;
  /** On a Cluster, the master serving the decision's slot when it was queued. */
  node?: string;
}

/**
 * The Redis store: every decision is one `EVALSHA` of a decision script (after `SCRIPT FLUSH`, a restart, a
 * failover or a server evicting its script cache, the `NOSCRIPT` reply is followed by the script once more: `EVAL`,
 * or `SCRIPT LOAD` with GLIDE; nothing ran, so nothing counts twice). All keys of a decision share one hash tag,
 * so it runs unchanged on Redis Cluster.
 *
 * On a standalone Redis, decisions made in the same event-loop turn share one call (`batch`, on by default): the
 * script decides them one after the other, exactly as separate calls would, and Node and Redis pay the
 * per-command cost once per batch instead of once per decision. A batch leaves when it is full or when the
 * turn ends, sent at once, so several can be in flight; a lone decision goes the same way, with its
 * algorithm's lean script. A cluster cannot run keys of several slots in one script, so there every
 * decision is its own call; with ioredis, the calls of one turn go to each master in one write (a pipeline).
 *
 * Calls with a fixed number of keys (decisions on a Cluster or with `batch` off, refunds, lockouts) are
 * prepared up front: per algorithm, the lone script for one policy's decision (algorithms/lone.lua) and a
 * lean one for its refunds and lockouts; per policy count, the script holding every algorithm. The client
 * library is behind a {@link RedisScriptTransport}: ioredis, node-redis or Valkey GLIDE, told apart by shape.
 */
export class RedisStore implements RateLimitStore {
  /** The client library's side of every call. */
  private readonly transport: RedisScriptTransport;
  /** Per algorithm: one policy's decision (see {@link isLone}). */
  private readonly lone = new Map<string, ScriptRunner>();
  /** Per algorithm: one policy's refund, lockout or penalty, or a decision the lone script does not take. */
  private readonly single = new Map<string, ScriptRunner>();
  /** `multi[n]` decides n policies of any algorithms. */
  private readonly multi: ScriptRunner[] = [];
  /** With batching (standalone Redis): each algorithm's lone script, and the one holding them all. */
  private readonly direct?: { lone: Map<string, LuaScript>; all: LuaScript };
  /** With batching on a Cluster whose client pipelines: the scripts of calls sent alone, by algorithm. */
  private readonly perNode?: { lone: Map<string, LuaScript>; single: Map<string, LuaScript>; all: LuaScript };
  private queue: Queued[] = [];
  /** Policy decisions in {@link queue} (a standalone batch leaves at {@link MAX_BATCH}). */
  private queuedPolicies = 0;
  /** The last key {@link nodeOf} hashed, and its slot. */
  private lastSlotKey: string | undefined;
  private lastSlot = 0;

  /**
   * @param client an ioredis client or cluster, a node-redis 5 client or cluster, or a Valkey GLIDE 2 client or cluster client.
   * @param algorithms the algorithms whose scripts to register.
   * @param owned whether `close()` quits the client (only for clients this library created).
   * @param batch whether decisions of one tick share a call (on a Cluster: one write per master, with ioredis).
   */
  constructor(
    readonly client: RedisClient,
    algorithms: readonly RateLimitAlgorithm[],
    private readonly owned: boolean,
    batch = true,
  ) {
    const transport = (this.transport = transportFor(client));
    const lone = new Map(algorithms.map((algorithm) => [algorithm.name, luaScript(composeLoneScript(algorithm))]));
    const single = new Map(algorithms.map((algorithm) => [algorithm.name, luaScript(composeDecideScript([algorithm]))]));
    const all = luaScript(composeDecideScript(algorithms));
    for (const algorithm of algorithms) {
      const { name, keyTag } = algorithm;
      this.lone.set(name, transport.prepare(lone.get(name)!, decisionKeyCount(1), `rlDecideOne_${keyTag}`));
      this.single.set(name, transport.prepare(single.get(name)!, decisionKeyCount(1), `rlDecide_${keyTag}`));
    }
    for (let n = 1; n <= MAX_POLICIES_PER_DECISION; n++) this.multi[n] = transport.prepare(all, decisionKeyCount(n), `rlDecideAll_${n}`);
    if (batch && !transport.isCluster) this.direct = { lone, all };
    if (batch && transport.isCluster && transport.pipeline) this.perNode = { lone, single, all };
  }

  /** Whether the client is a cluster client. */
  get isCluster(): boolean {
    return this.transport.isCluster;
  }

  decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    return new Promise<StoreDecision>((resolve, reject) => {
      const queued: Queued = { calls, mode, resolve, reject };
      if (this.perNode && calls.length <= MAX_POLICIES_PER_DECISION) {
        // Asked now, right after the resilience layer asked for the same key: its slot is hashed once (see nodeOf).
        queued.node = this.nodeOf(calls[0].stateKey);
        if (this.queue.push(queued) === 1) setImmediate(() => this.flushPerNode());
      } else if (!this.direct || calls.length > MAX_POLICIES_PER_DECISION) {
        this.sendAlone(queued);
      } else {
        // A batch never holds more than MAX_BATCH policies: one that would go over leaves first.
        if (this.queuedPolicies + calls.length > MAX_BATCH) this.flush();
        const waiting = this.queue.push(queued);
        this.queuedPolicies += calls.length;
        if (this.queuedPolicies >= MAX_BATCH) this.flush();
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
    if (typeof reply[1] === 'string')
      throw await this.explain(calls, new RateLimitStoreError(`Redis failed the penalty: ${reply[1]}`, { outage: false }));
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
    await Promise.all(keys.map((key) => this.transport.del(key)));
  }

  /** Runs writeOverride-3.lua: one call to the master of the overrides' slot. */
  async writeOverride(keys: OverrideKeys, { field, value, untilMs, maxCount }: OverrideWrite): Promise<OverrideWriteResult> {
    const reply = (await this.transport.evalScript(
      WRITE_OVERRIDE,
      [keys.overrides, keys.version, keys.expiries],
      [field, value ?? '', String(untilMs), String(maxCount)],
    )) as ReadonlyArray<number | string>;
    return { version: String(reply[0]), nowMs: Number(reply[1]), status: WRITE_STATUS[Number(reply[2])] ?? 'ok' };
  }

  /**
   * Runs readOverrides-3.lua: the version and `TIME`, the instance's heartbeat and the count of live instances,
   * and the whole hash only when the version moved.
   */
  async readOverrides(keys: OverrideKeys, knownVersion: string | undefined, heartbeat?: InstanceHeartbeat): Promise<OverrideRead> {
    const reply = (await this.transport.evalScript(
      READ_OVERRIDES,
      [keys.overrides, keys.version, keys.instances],
      [knownVersion ?? '', heartbeat?.id ?? '', String(heartbeat?.liveMs ?? 0)],
    )) as ReadonlyArray<number | string | ReadonlyArray<string>>;
    const read: OverrideRead = { version: String(reply[0]), nowMs: Number(reply[1]) };
    if (heartbeat !== undefined) read.liveInstances = Number(reply[2]);
    const flat = reply[3];
    if (Array.isArray(flat)) {
      const entries: Array<[string, string]> = [];
      for (let i = 0; i + 1 < flat.length; i += 2) entries.push([String(flat[i]), String(flat[i + 1])]);
      read.entries = entries;
    }
    return read;
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

  /**
   * Sends the decisions queued since the last batch left (at most {@link MAX_BATCH} policies) in one call: a lone
   * single-policy decision with its algorithm's lone script, anything else with the script holding them all.
   */
  private flush(): void {
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    this.queuedPolicies = 0;
    const first = batch[0];
    if (batch.length === 1 && isLone(first.calls, MODE_CODE[first.mode])) {
      const { keys, args } = loneCall(first.calls[0], MODE_CODE[first.mode]);
      // The lone script fails the call on an error (a key of the wrong type) where the batch script reports it in place.
      this.transport
        .evalScript(this.direct!.lone.get(first.calls[0].algorithm.name)!, keys, args)
        .then((reply) => first.resolve(parseLoneDecision(reply as Reply)))
        .catch((error: unknown) => this.explainError(first.calls, error).then(first.reject, first.reject));
      return;
    }
    const call = new DecideCall();
    for (const { calls, mode } of batch) call.add(calls, MODE_CODE[mode]);
    this.transport
      .evalScript(this.direct!.all, call.keys, call.args)
      .then((reply) => this.settle(batch, reply as Reply))
      .catch((error: unknown) => {
        // The call failed as a whole (connection, timeout): whether it ran is unknown, so no decision is
        // retried (that could charge twice); each fails, as its own call would have.
        for (const q of batch) q.reject(error);
      });
  }

  /**
   * On a Cluster: the decisions queued this turn, grouped by the master serving their slot, each group written
   * to its master at once (a pipeline of one `EVALSHA` per decision). A decision Redis did not run (`NOSCRIPT`,
   * or a slot that moved: `MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`) goes again alone, through the client's own
   * redirection and script handling; any other failure is its own, as its own call's would be.
   */
  private flushPerNode(): void {
    const queued = this.queue;
    this.queue = [];
    const byNode = new Map<string, Queued[]>();
    for (const q of queued) {
      const node = q.node;
      if (node === undefined) {
        this.sendAlone(q);
        continue;
      }
      const group = byNode.get(node);
      if (group) group.push(q);
      else byNode.set(node, [q]);
    }
    for (const group of byNode.values()) {
      if (group.length === 1) {
        this.sendAlone(group[0]);
        continue;
      }
      const alone = group.map(({ calls, mode }) => aloneCall(calls, MODE_CODE[mode]));
      const calls = alone.map(({ kind, keys, args }, i) => ({ script: this.scriptFor(group[i].calls, kind), keys, args }));
      this.transport.pipeline!(calls).then(
        (replies) =>
          group.forEach((q, i) => {
            const [error, reply] = replies[i] ?? [new RateLimitStoreError('no reply in the pipeline'), undefined];
            if (!error) this.settleAlone(q, reply as Reply, alone[i].kind);
            else if (nothingRan(error)) this.sendAlone(q);
            else this.explainError(q.calls, error).then(q.reject, q.reject);
          }),
        (error: unknown) => {
          // The slot map changed between grouping and sending: nothing was sent.
          if (error instanceof Error && error.message.includes('should belong to the same slot')) group.forEach((q) => this.sendAlone(q));
          else for (const q of group) q.reject(error);
        },
      );
    }
  }

  /** One decision as its own call. */
  private sendAlone(q: Queued): void {
    const call = aloneCall(q.calls, MODE_CODE[q.mode]);
    this.send(q.calls, call)
      .then((reply) => this.settleAlone(q, reply as Reply, call.kind))
      .catch(q.reject);
  }

  /** Hands a decision sent as its own call its reply: the lone script's, or decide.lua's. */
  private settleAlone(q: Queued, reply: Reply, kind: ScriptKind): void {
    if (kind === 'lone') q.resolve(parseLoneDecision(reply));
    else this.settle([q], reply);
  }

  /** The script of `kind` for these calls (the one {@link send} runs). */
  private scriptFor(calls: readonly RateLimitCall[], kind: ScriptKind): LuaScript {
    const { lone, single, all } = this.perNode!;
    return kind === 'multi' ? all : (kind === 'lone' ? lone : single).get(calls[0].algorithm.name)!;
  }

  /** Hands each decision of `batch` its part of the script's reply. */
  private settle(batch: readonly Queued[], reply: Reply): void {
    let offset = 1;
    for (const q of batch) {
      const flag = reply[offset];
      // A decision the script reported as failed has its message in place of its first status.
      if (typeof flag === 'string')
        this.explain(q.calls, new RateLimitStoreError(`Redis failed the decision: ${flag}`, { outage: OUTAGE_REPLY.test(flag) })).then(
          q.reject,
          q.reject,
        );
      else q.resolve(parseDecision(reply as readonly number[], offset, q.calls.length));
      offset += q.calls.length * REPLY_PER_CALL;
    }
  }

  private run(calls: readonly RateLimitCall[], mode: string): Promise<unknown> {
    return this.send(calls, aloneCall(calls, mode));
  }

  /** Sends `calls` as their own script call, prepared by {@link aloneCall}. */
  private async send(calls: readonly RateLimitCall[], { kind, keys, args }: AloneCall): Promise<unknown> {
    const name = calls[0].algorithm.name;
    const command = kind === 'lone' ? this.lone.get(name) : kind === 'single' ? this.single.get(name) : this.multi[calls.length];
    if (!command) {
      throw new RateLimitStoreError(
        `A decision covers ${calls.length} policies of one tracker; at most ${MAX_POLICIES_PER_DECISION} are supported.`,
        { outage: false },
      );
    }
    try {
      return await command(keys, args);
    } catch (error) {
      throw await this.explainError(calls, error);
    }
  }

  /** A failed call's error, naming the key that holds someone else's data when that is why it failed. */
  private async explainError(calls: readonly RateLimitCall[], error: unknown): Promise<unknown> {
    return error instanceof Error ? this.explain(calls, error) : error;
  }

  private explain(calls: readonly RateLimitCall[], cause: Error): Promise<Error> {
    return explainForeignData(calls, cause, (key) => this.transport.type(key));
  }
}

/** Replies of a server (or a slot) that cannot serve now, whatever the decision. */
const OUTAGE_REPLY = /^(CLUSTERDOWN|TRYAGAIN|LOADING|MASTERDOWN|BUSY|READONLY|OOM|NOAUTH|NOPERM|WRONGPASS|MISCONF|NOREPLICAS)\b/;

/** Errors after which Redis ran nothing: the script was missing, or the key's slot is served elsewhere or not now. */
function nothingRan(error: Error): boolean {
  return /^(NOSCRIPT|MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(error.message);
}

/**
 * Which script a call sent on its own runs: its algorithm's lone script ({@link isLone}), its algorithm's own
 * for any other single-policy call, or the one holding every algorithm for several policies.
 */
type ScriptKind = 'lone' | 'single' | 'multi';

/** A call sent on its own: its script's kind, and its keys and arguments in that script's layout. */
interface AloneCall {
  kind: ScriptKind;
  keys: string[];
  args: string[];
}

/** `calls` as a call of their own, the kind of script found once (it decides the layout and, later, the reply's). */
function aloneCall(calls: readonly RateLimitCall[], mode: string): AloneCall {
  if (isLone(calls, mode)) return { kind: 'lone', ...loneCall(calls[0], mode) };
  const { keys, args } = new DecideCall().add(calls, mode);
  return { kind: calls.length === 1 ? 'single' : 'multi', keys, args };
}
