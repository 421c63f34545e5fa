import type { RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import { RateLimitStoreError } from '../../errors/rate-limit-store.error';
import { MAX_POLICIES_PER_DECISION, type RateLimitCall, type StoreDecision } from '../store.interface';
import {
  DecideCall,
  explainForeignData,
  isOnePolicy,
  onePolicyCall,
  ownCall,
  parseDecision,
  parseOnePolicyReply,
  REPLY_PER_CALL,
  UnitShapes,
} from './redis-codec';
import { DecisionScripts } from './decision-scripts';
import { cannotRunAcrossSlots, NOT_HERE, nothingRan, OUTAGE_REPLY } from './script-replies';
import { ServerClock } from './server-clock';
import type { RedisScriptTransport, ScriptCall } from './transports/redis-transport';

/**
 * Most policy decisions in one batch call (a request of 8 policies counts 8). A full batch leaves at once, so
 * Redis decides it while Node is still making the next (measured: 1.4 - 2x the decisions/s of one batch per
 * tick at 64 callers); counting policies, not requests, keeps one script run short whatever the policy count
 * (32 requests of 8 policies held Redis 1.3 - 2.4 ms per run, and everyone else with it).
 */
export const MAX_BATCH = 32;

/**
 * How the decisions of one event-loop turn travel: each as its own call; together, in one call per batch to the
 * one server; or, on a Cluster, in one call per batch to each master.
 */
export type Batching = 'none' | 'per-server' | 'per-master';

/** A script reply: integers, and an error message in the place of a decision that failed. */
type Reply = ReadonlyArray<number | string>;

/** A decision waiting for the batch of its turn. */
interface Queued {
  calls: readonly RateLimitCall[];
  /** decide.lua's mode letter: `c` consume or `p` peek. */
  mode: string;
  resolve(decision: StoreDecision): void;
  reject(error: unknown): void;
  /** On a Cluster, the master serving the decision's slot when it was queued. */
  master?: string;
  /** On a Cluster, whether a batch across slots already found the decision's keys elsewhere (see `sendAgain`). */
  sentAgain?: boolean;
}

/**
 * The one place that sends decision scripts to Redis and hands each decision its reply. Per decision it picks
 * the cheapest way that keeps it exact:
 * - a decision of its own, or a refund, lockout or penalty: one call with a fixed number of keys
 *   ({@link sendOwnCall}, prepared commands that ioredis can pipeline);
 * - on one server, the decisions of a turn in one call of decide.lua ({@link sendBatch});
 * - on a Cluster, the decisions of a turn grouped by the master serving their slot, one call per master of
 *   decide.lua across slots ({@link sendBatchAcrossSlots}); a decision whose key that master does not hold (a
 *   reshard) goes again ({@link sendAgain}), in the end as its own call, which follows `MOVED` and `ASK`. A
 *   server that cannot run a script across slots (before Redis 7.0, KeyDB) gets each master's decisions as a
 *   pipeline of calls of their own ({@link sendPipeline}), or each as its own call where the client has none.
 */
export class ScriptDispatcher {
  private readonly scripts: DecisionScripts;
  /** False once a master failed to compile the script across slots: pipelines (or calls of their own) from then on. */
  private acrossSlotsRuns = true;
  private queue: Queued[] = [];
  /** Policy decisions in {@link queue} (a batch leaves at {@link MAX_BATCH}). */
  private queuedPolicies = 0;
  private readonly clock = new ServerClock();
  private readonly unitShapes = new UnitShapes();

  constructor(
    private readonly transport: RedisScriptTransport,
    algorithms: readonly RateLimitAlgorithm[],
    private readonly batching: Batching,
    /** On a Cluster, the master serving a key's slot (undefined when the client's slot map does not say). */
    private readonly masterOf: (key: string) => string | undefined,
  ) {
    this.scripts = new DecisionScripts(transport, algorithms);
  }

  /** One decision of `calls` (one tracker's policies) in `mode` (`c` or `p`), batched as {@link Batching} says. */
  decide(calls: readonly RateLimitCall[], mode: string): Promise<StoreDecision> {
    return new Promise<StoreDecision>((resolve, reject) => {
      const queued: Queued = { calls, mode, resolve, reject };
      if (this.batching === 'none' || calls.length > MAX_POLICIES_PER_DECISION) return this.sendDecision(queued);
      if (this.batching === 'per-master') {
        queued.master = this.masterOf(calls[0].stateKey);
        if (queued.master === undefined) return this.sendDecision(queued);
        if (this.queue.push(queued) === 1) setImmediate(() => this.sendPerMaster());
        return;
      }
      // A batch never holds more than MAX_BATCH policies: one that would go over leaves first.
      if (this.queuedPolicies + calls.length > MAX_BATCH) this.sendQueued();
      const waiting = this.queue.push(queued);
      this.queuedPolicies += calls.length;
      if (this.queuedPolicies >= MAX_BATCH) this.sendQueued();
      // setImmediate, not nextTick: requests read from several sockets in one poll phase join one batch.
      else if (waiting === 1) setImmediate(() => this.sendQueued());
    });
  }

  /** `calls` in `mode` (any of decide.lua's) as a call of their own; resolves with the script's reply. */
  async sendOwnCall(calls: readonly RateLimitCall[], mode: string, call = ownCall(calls, mode)): Promise<unknown> {
    try {
      return await this.scripts.sendOwn(calls, call);
    } catch (error) {
      throw await this.explainError(calls, error);
    }
  }

  /** For an error that someone else's data under our prefix caused, one that names the key; else `cause`. */
  explain(calls: readonly RateLimitCall[], cause: Error): Promise<Error> {
    return explainForeignData(calls, cause, (key) => this.transport.type(key));
  }

  /** One decision as its own call. */
  private sendDecision(q: Queued): void {
    const call = ownCall(q.calls, q.mode);
    this.sendOwnCall(q.calls, q.mode, call)
      .then((reply) =>
        call.script === 'one-policy' ? q.resolve(this.onePolicyDecision(reply as Reply, q.calls[0])) : this.settle([q], reply as Reply),
      )
      .catch(q.reject);
  }

  /** The decisions queued on one server since the last batch left, in one call. */
  private sendQueued(): void {
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    this.queuedPolicies = 0;
    this.sendBatch(batch);
  }

  /**
   * One call for `batch` on one server (or one decision on a Cluster): a single decision of one policy with its
   * algorithm's one-policy script, anything else with decide.lua holding every algorithm. Sent straight to the
   * connection, not through the client's auto-pipeline, which would hold it for another turn.
   */
  private sendBatch(batch: readonly Queued[]): void {
    const first = batch[0];
    if (batch.length === 1 && isOnePolicy(first.calls, first.mode)) {
      const { keys, args } = onePolicyCall(first.calls[0], first.mode);
      // The one-policy script fails the call on an error (a key of the wrong type) where decide.lua reports it in place.
      this.scripts
        .sendOnePolicy(first.calls[0].algorithm.name, keys, args)
        .then((reply) => first.resolve(this.onePolicyDecision(reply as Reply, first.calls[0])))
        .catch((error: unknown) => this.explainError(first.calls, error).then(first.reject, first.reject));
      return;
    }
    const call = new DecideCall(this.unitShapes);
    for (const { calls, mode } of batch) call.add(calls, mode);
    this.transport
      .evalScript(this.scripts.anyAlgorithm, call.keys, call.args)
      .then((reply) => this.settle(batch, reply as Reply))
      // The call failed as a whole (connection, timeout): whether it ran is unknown, so no decision is retried
      // (that could charge twice); each fails, as its own call would have.
      .catch((error: unknown) => batch.forEach((q) => q.reject(error)));
  }

  /** On a Cluster: the decisions queued this turn, by the master serving their slot, at most {@link MAX_BATCH} policies a call. */
  private sendPerMaster(): void {
    const queued = this.queue;
    this.queue = [];
    const byMaster = new Map<string, Queued[]>();
    for (const q of queued) {
      const group = byMaster.get(q.master!);
      if (group) group.push(q);
      else byMaster.set(q.master!, [q]);
    }
    for (const group of byMaster.values()) {
      let batch: Queued[] = [];
      let policies = 0;
      for (const q of group) {
        if (policies + q.calls.length > MAX_BATCH) {
          this.sendToMaster(batch);
          batch = [];
          policies = 0;
        }
        batch.push(q);
        policies += q.calls.length;
      }
      this.sendToMaster(batch);
    }
  }

  private sendToMaster(batch: Queued[]): void {
    // One decision's keys share a slot: no script across slots is needed.
    if (batch.length === 1) this.sendBatch(batch);
    else if (this.acrossSlotsRuns) this.sendBatchAcrossSlots(batch);
    else if (this.transport.pipeline) this.sendPipeline(batch);
    else batch.forEach((q) => this.sendDecision(q));
  }

  /**
   * One call of decide.lua across slots to the batch's master: on its own connection (ioredis), else routed by the
   * batch's first key. A decision whose keys that
   * master does not hold (its slot moved since the slot map was read, or is moving) failed alone, before it
   * charged anything, and goes again ({@link sendAgain}).
   */
  private sendBatchAcrossSlots(batch: Queued[]): void {
    const call = new DecideCall(this.unitShapes);
    for (const { calls, mode } of batch) call.add(calls, mode);
    const prefix = this.transport.keyPrefix;
    const args = [...call.args, ...(prefix === '' ? call.keys : call.keys.map((key) => prefix + key))];
    // Sent on the master's own connection where the client allows it: routed by a key instead, the whole batch
    // would follow that one key's redirection during a reshard, away from every other key's master.
    const sent =
      this.transport.evalOnNode?.(batch[0].master!, this.scripts.acrossSlots, args) ??
      this.transport.evalScript(this.scripts.acrossSlots, [call.keys[0]], args);
    sent
      .then((reply) => this.settle(batch, reply as Reply, true))
      .catch((error: unknown) => {
        // Refused before it ran (a redirection the client did not follow, a master that became a replica): each
        // decision goes again as its own call, which follows the client's slot map and redirections.
        if (error instanceof Error && nothingRan(error)) return batch.forEach((q) => this.sendDecision(q));
        if (!cannotRunAcrossSlots(error)) return batch.forEach((q) => q.reject(error));
        this.acrossSlotsRuns = false;
        this.sendToMaster(batch);
      });
  }

  /**
   * A master's decisions as a pipeline of calls of their own, written at once. A decision Redis did not run
   * (`NOSCRIPT`, or a slot that moved: `MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`) goes again as its own call,
   * through the client's redirection and script handling; any other failure is its own.
   */
  private sendPipeline(batch: Queued[]): void {
    const own = batch.map(({ calls, mode }) => ownCall(calls, mode));
    const calls: ScriptCall[] = own.map(({ script, keys, args }, i) => ({
      script: this.scripts.scriptOf(batch[i].calls, script),
      keys,
      args,
    }));
    this.transport.pipeline!(calls).then(
      (replies) =>
        batch.forEach((q, i) => {
          const [error, reply] = replies[i] ?? [new RateLimitStoreError('no reply in the pipeline'), undefined];
          if (!error) {
            if (own[i].script === 'one-policy') q.resolve(this.onePolicyDecision(reply as Reply, q.calls[0]));
            else this.settle([q], reply as Reply);
          } else if (nothingRan(error)) this.sendDecision(q);
          else this.explainError(q.calls, error).then(q.reject, q.reject);
        }),
      (error: unknown) => {
        // The slot map changed between grouping and sending: nothing was sent.
        if (error instanceof Error && error.message.includes('should belong to the same slot')) batch.forEach((q) => this.sendDecision(q));
        else batch.forEach((q) => q.reject(error));
      },
    );
  }

  /**
   * A decision whose keys its batch's master did not hold: its slot moved since the slot map was read, or the
   * batch, routed by a key whose slot had moved, followed that key's `MOVED` or `ASK`. It joins the next turn's
   * batch of the master the slot map now names. One that fails twice (its own slot is moving) goes
   * as its own call, which follows the redirection.
   */
  private sendAgain(q: Queued): void {
    if (q.sentAgain) return this.sendDecision(q);
    q.sentAgain = true;
    q.master = this.masterOf(q.calls[0].stateKey);
    if (q.master === undefined) return this.sendDecision(q);
    if (this.queue.push(q) === 1) setImmediate(() => this.sendPerMaster());
  }

  /** A one-policy script's reply to `call`, as the decision it holds (its now found when the script read no clock). */
  private onePolicyDecision(reply: Reply, call: RateLimitCall): StoreDecision {
    return this.clock.complete(parseOnePolicyReply(reply), call.params.windowMs);
  }

  /**
   * Hands each decision of `batch` its part of decide.lua's reply. A decision the script reported as failed has
   * its message in place of its first status; across slots, one that failed on a key its master does not hold
   * goes again.
   */
  private settle(batch: readonly Queued[], reply: Reply, acrossSlots = false): void {
    let offset = 1;
    for (const q of batch) {
      const flag = reply[offset];
      if (typeof flag !== 'string') q.resolve(parseDecision(reply as readonly number[], offset, q.calls.length));
      else if (acrossSlots && NOT_HERE.test(flag)) this.sendAgain(q);
      else {
        const error = new RateLimitStoreError(`Redis failed the decision: ${flag}`, { outage: OUTAGE_REPLY.test(flag) });
        this.explain(q.calls, error).then(q.reject, q.reject);
      }
      offset += q.calls.length * REPLY_PER_CALL;
    }
  }

  private async explainError(calls: readonly RateLimitCall[], error: unknown): Promise<unknown> {
    return error instanceof Error ? this.explain(calls, error) : error;
  }
}
