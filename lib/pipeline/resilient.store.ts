import { Logger } from '@nestjs/common';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import { MemoryStore } from '../stores/memory/memory.store';
import { describeCause } from '../stores/store-description';
import { StoreDeadlines, type DeadlineWatcher, type StoreTimings } from './store-deadlines';
import { isOutageOf, penalizeIn, pingStore } from '../stores/store-health';
import { seeing, StoreLayer, type AnswerWatcher, type OutageDescription } from './store-layer';
import type {
  DecisionMode,
  InstanceHeartbeat,
  OverrideKeys,
  OverrideRead,
  RateLimitCall,
  RateLimitStore,
  StoreDecision,
  StoreVerdict,
} from '../stores/store.interface';
import { Verdict } from '../stores/verdicts';

/** Options of {@link ResilientStore}. */
export interface ResilientStoreOptions {
  /** Deadline of one decision, ms of the store's own time (see {@link StoreDeadlines}). */
  timeoutMs: number;
  /**
   * Share of each limit an instance may grant on its own while the store is away (`insurance`). Absent: 1 / the
   * instances seen live lately, as the runtime overrides' reads count them (see {@link ResilientStore.readOverrides}),
   * so the fleet as a whole grants about the limit; 1 until a read has counted them.
   */
  insuranceShare?: number;
  /** Least interval between two store-error log lines, ms. */
  logIntervalMs: number;
  /** After an outage, decisions skip the store for this long before trying it again, ms. */
  retryAfterFailureMs: number;
  /** Called on every store failure (already rate-limited logging is separate). */
  onError?: (error: Error) => void;
  /** The inner store as log lines name it (`Redis at 127.0.0.1:6379`); without it, lines say "rate-limit store". */
  name?: string;
  /** Why the inner store cannot be reached, when it knows (its client's last connection error). */
  connectionError?: () => Error | undefined;
  /**
   * Which part of the inner store holds a key (for a Redis Cluster, the master serving its slot), so that an
   * outage opens the circuit for that part's keys only and the others keep deciding with the store. Absent,
   * or `undefined` for a key: one circuit for the whole store.
   */
  shardOf?: (key: string) => string | undefined;
  /** Monotonic time source of deadlines, circuits and log intervals, ms. @default performance.now */
  clock?: () => number;
  /** Wall-clock time of the insurance store's windows, ms. @default Date.now */
  wallClock?: () => number;
}

/** The circuit of a store without shards, or of keys of no known shard. */
const WHOLE = '';

/** A call under a deadline: the promise its caller holds, and what answers it when the store does not. */
interface Guarded {
  resolve(value: unknown): void;
  reject(error: unknown): void;
  /**
   * Answers in the store's place once the call failed (a decision's fallback, nothing for a refund), the
   * failure counting against the circuit of `shard`; without it, the caller gets the error and no circuit hears.
   */
  recover: ((calls: readonly RateLimitCall[], mode: DecisionMode) => unknown) | undefined;
  calls: readonly RateLimitCall[];
  mode: DecisionMode;
  key: string | undefined;
  shard: string | undefined;
  /** A layer above that sees the answer before the promise settles with it (see {@link StoreLayer.decideSeen}). */
  seen: AnswerWatcher | undefined;
}

/** A refund or release that failed answers nothing: it only errs on the strict side. */
const answerNothing = (): undefined => undefined;

/**
 * Keeps a slow or failing store (`inner`, the one it wraps) from taking requests down with it. Every decision has a deadline, counted in
 * the store's own time (a stall of this process is not the store's: see {@link StoreDeadlines}). A failure is
 * either an outage (no answer, a lost connection, `CLUSTERDOWN`…) or the decision's own (a key holding someone
 * else's data, a calendar period the store's clock is not in); only an outage of a store, or of a Cluster
 * master, that answered no later call opens a short circuit, during which its decisions do not wait for it at
 * all; then the next decision tries it again (recovery is automatic). A decision that fails on its own, or
 * alone while its master answers others (a slot moving during a reshard), gets its fallback and nothing more.
 * The fallback is each call's: allow, reject, or the in-process insurance store with a share of the limit.
 *
 * An outage is logged when it begins (at most once per `logIntervalMs`, naming the store and the cause) and,
 * once reported, when the store answers again; a decision's own failure once per cause and interval.
 */
export class ResilientStore extends StoreLayer {
  private readonly logger = new Logger('RateLimit');
  private readonly insurance: MemoryStore;
  /** Calls a fallback answered: they took nothing from the inner store, so their refunds never go there. */
  private readonly answeredLocally = new WeakSet<RateLimitCall>();
  private readonly deadlines: StoreDeadlines<Guarded>;
  /**
   * Per shard ({@link WHOLE} without shards): until when decisions skip it. A circuit found closed again is
   * dropped, so while the store answers the map is empty and decisions read neither it nor the clock.
   */
  private readonly openUntil = new Map<string, number>();
  /**
   * Per shard: when the latest call it answered was sent, which tells a slow call from a store that is down
   * (a record, so that an answer costs one lookup).
   */
  private readonly answeredSentAt = new Map<string, { sentAt: number }>();
  /** The same for {@link WHOLE} (every call, without shards): a field, not a Map entry written per answer. */
  private wholeAnsweredSentAt = -Infinity;
  /** A decision's fallback, for {@link Guarded.recover}: one function for every call. */
  private readonly fallbackAnswer = (calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision => this.fallback(calls, mode);
  /** Per cause of a decision's own failure: when it was last logged (a handful of causes; cleared past 64). */
  private readonly causeLogged = new Map<string, number>();
  private lastLog = -Infinity;
  private suppressed = 0;
  /** When the current outage began (a failure, or no connection at startup); undefined while the store answers. */
  private downSince: number | undefined;
  /** A key whose failure began the current outage; whichever shard serves it now answering ends the outage. */
  private downKey: string | undefined;
  /** Whether a warning reported the current outage, so its end is reported too (once). */
  private reported = false;
  private readonly clock: () => number;
  private readonly wallClock: () => number;
  /** Instances the store counted as live at its last answered read of the overrides (this one included). */
  private liveInstances = 1;

  constructor(
    inner: RateLimitStore,
    private readonly options: ResilientStoreOptions,
  ) {
    super(inner);
    this.clock = options.clock ?? (() => performance.now());
    this.wallClock = options.wallClock ?? Date.now;
    this.insurance = new MemoryStore({ clock: this.wallClock });
    this.deadlines = new StoreDeadlines(options.timeoutMs, this.watcher(), this.clock);
  }

  override decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    return this.decideWatched(calls, mode, undefined);
  }

  /** The watcher hears the answer where this layer settles the decision's promise. */
  override decideSeen(calls: readonly RateLimitCall[], mode: DecisionMode, watcher: AnswerWatcher): Promise<StoreDecision> {
    return this.decideWatched(calls, mode, watcher);
  }

  private decideWatched(calls: readonly RateLimitCall[], mode: DecisionMode, seen: AnswerWatcher | undefined): Promise<StoreDecision> {
    // All keys of one decision share a hash tag, so its first key's shard is the decision's.
    const key = calls[0]?.stateKey;
    const shard = this.shardOf(key);
    if (this.isOpen(shard)) {
      const answer = Promise.resolve(this.fallback(calls, mode));
      return seen ? seeing(answer, calls, seen) : answer;
    }
    return this.guard(this.inner.decide(calls, mode), guarded(this.fallbackAnswer, calls, mode, key, shard, seen));
  }

  /** While the circuit is open, the fallback answers at once (see {@link RateLimitStore.decideSync}). */
  override decideSync(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision | undefined {
    // No circuit open, as while the store answers: not even the shard to find.
    if (this.openUntil.size === 0) return undefined;
    return this.isOpen(this.shardOf(calls[0]?.stateKey)) ? this.fallback(calls, mode) : undefined;
  }

  /**
   * Gives back only what was taken, where it was taken: a call the inner store decided, to it; a call the
   * fallback answered took nothing there (`fail-open`, `fail-closed`) or only from the insurance store
   * (`insurance`): giving it back to the inner store would erase a real count there, and a lease release would
   * only wait out its deadline against a store that is down.
   */
  override async refund(calls: readonly RateLimitCall[]): Promise<void> {
    const decidedByInner = calls.filter((c) => !this.answeredLocally.has(c));
    const insured = calls.filter((c) => c.fallback === 'insurance' && this.answeredLocally.has(c));
    if (decidedByInner.length > 0) await this.bestEffort(decidedByInner);
    if (insured.length > 0) await this.insurance.refund(insured.map((c) => this.insuredCall(c)));
  }

  /** Always the inner store's: a penalty is never decided by a fallback (it rejects when the store fails). */
  override penalize(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    return this.guard(penalizeIn(this.inner, calls), unrecovered());
  }

  override async block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    await this.guard(this.inner.block(calls, ms), unrecovered());
  }

  override async delete(keys: readonly string[]): Promise<void> {
    await this.insurance.delete(keys);
    await this.guard(this.inner.delete(keys), unrecovered());
  }

  /** The inner store's `PING` within `timeoutMs`; a failed ping is not a decision failure (no fallback window, no `onError`). */
  override ping(): Promise<void> {
    return this.guard(pingStore(this.inner), unrecovered());
  }

  /** How long the store took to answer lately, and this process's own stalls meanwhile. */
  override timings(): StoreTimings {
    return this.deadlines.timings();
  }

  /**
   * The inner store's `ready`; when it is, logs how long a `PING` took and what the deadline counts; when it
   * is not, warns (naming the store and the cause) and starts an outage.
   */
  override async ready(timeoutMs: number): Promise<boolean> {
    const started = this.clock();
    const ready = (await this.inner.ready?.(timeoutMs)) ?? true;
    if (!ready) {
      this.downSince ??= started;
      const line = this.unavailable(new RateLimitStoreError(`not connected after ${timeoutMs} ms`));
      this.warn(`${line}. Starting anyway; deciding with each policy's onStoreError until it answers.`, this.clock());
    } else if (this.inner.ping) {
      await this.ping().then(
        () => {
          const { storeLatencyMs, eventLoopDelayMs } = this.deadlines.timings();
          this.logger.log(
            `${this.options.name ?? 'The rate-limit store'} answered PING in ${storeLatencyMs.max} ms (event-loop delay ${eventLoopDelayMs.max} ms); ` +
              `a decision waits up to storeTimeoutMs (${this.options.timeoutMs} ms) of its time, this process's own stalls not counted.`,
          );
        },
        () => undefined, // the first decisions will say why, through the usual outage line
      );
    }
    return ready;
  }

  /**
   * The overrides' read, straight to the store as any administrative call; the count of live instances it brings
   * back (the heartbeat's) is kept, and divides each limit while the store is away unless `insuranceShare` is set.
   * An outage keeps the count of the last read that answered: the instances live just before it.
   */
  override async readOverrides(keys: OverrideKeys, knownVersion: string | undefined, heartbeat?: InstanceHeartbeat): Promise<OverrideRead> {
    const read = await super.readOverrides(keys, knownVersion, heartbeat);
    if (read.liveInstances !== undefined && read.liveInstances >= 1) this.liveInstances = read.liveInstances;
    return read;
  }

  /** The outage behind `error` in this layer's words, and what decisions do until the store answers again. */
  override describeOutage(error: unknown): OutageDescription | undefined {
    if (!isOutageOf(this.inner, error)) return undefined;
    const { name } = this.options;
    const store = name === undefined ? 'the rate-limit store' : name.startsWith('Redis') ? 'Redis' : 'the store';
    return {
      what: this.unavailable(error instanceof Error ? error : new Error(String(error))),
      meanwhile: `each policy's onStoreError decides until ${store} answers again (${this.insuranceNote(store)})`,
    };
  }

  /** What `insurance` grants here while the store is away, and why that share. */
  private insuranceNote(store: string): string {
    const { insuranceShare } = this.options;
    const grants = "with 'insurance', the default, this instance grants";
    if (insuranceShare !== undefined) return `${grants} ${+(insuranceShare * 100).toFixed(2)}% of each limit (insuranceShare)`;
    const live = this.liveInstances;
    if (live === 1) return `${grants} all of each limit: no other instance polled ${store} in the last minute`;
    return `${grants} 1/${live} of each limit: ${live} instances polled ${store} in the last minute`;
  }

  override async close(): Promise<void> {
    this.deadlines.close();
    await this.inner.close();
  }

  /** Refunds and releases must never fail a request: a lost refund only errs on the strict side. */
  private bestEffort(calls: readonly RateLimitCall[]): Promise<void> {
    const key = calls[0]?.stateKey;
    return this.guard(this.inner.refund(calls), guarded(answerNothing, calls, 'consume', key, this.shardOf(key), undefined));
  }

  /**
   * `work`'s result when it settles within the deadline. Otherwise, with `call.recover` (a decision, a refund),
   * the failure counts against the circuit of `call.shard` (the one serving `call.key`) and `recover` answers;
   * without it (an operator call, a ping), the promise rejects with the error, or the deadline's, and no circuit
   * hears of it. Every decision passes here: one context object and one promise, no closure of its own.
   */
  private guard<T>(work: Promise<T>, call: Guarded): Promise<T> {
    const promise = new Promise<T>((resolve, reject) => {
      call.resolve = resolve as (value: unknown) => void;
      call.reject = reject;
    });
    this.deadlines.run(work, call);
    return promise;
  }

  /** How calls under a deadline end: answered (the store is up), or failed (recovered, or the error passed on). */
  private watcher(): DeadlineWatcher<Guarded> {
    return {
      answered: (call, value, sentAt) => {
        this.answered(sentAt, call.shard);
        settle(call, value);
      },
      failed: (call, error, sentAt) => {
        if (!call.recover) return call.reject(error);
        this.failed(error, sentAt, call.shard, call.key);
        let answer: unknown;
        try {
          answer = call.recover(call.calls, call.mode);
        } catch (failure) {
          return call.reject(failure);
        }
        settle(call, answer);
      },
    };
  }

  /** The shard holding `key` (`shardOf`); undefined without `shardOf`, or for a key of no known shard. */
  private shardOf(key: string | undefined): string | undefined {
    return key === undefined ? undefined : this.options.shardOf?.(key);
  }

  /** Whether decisions for the shard (undefined: the whole store) skip the store for now. */
  private isOpen(shard: string | undefined): boolean {
    if (this.openUntil.size === 0) return false;
    const circuit = shard ?? WHOLE;
    const until = this.openUntil.get(circuit);
    if (until === undefined) return false;
    if (this.clock() < until) return true;
    this.openUntil.delete(circuit); // closed again: the next decisions need not read the clock for it
    return false;
  }

  /** When the latest call the shard answered was sent (−Infinity: none yet). */
  private lastAnswered(shard: string | undefined): number {
    return shard === undefined ? this.wholeAnsweredSentAt : (this.answeredSentAt.get(shard)?.sentAt ?? -Infinity);
  }

  /**
   * A call sent at `sentAt` failed. An outage of a shard that answered no call sent since opens its circuit and
   * is reported; anything else (see the class) is logged once per cause and fails that call alone.
   */
  private failed(error: unknown, sentAt: number, shard?: string, key?: string): void {
    const err = error instanceof Error ? error : new Error(String(error));
    this.options.onError?.(err);
    const outage = isOutageOf(this.inner, error);
    const answering = this.lastAnswered(shard) > sentAt;
    if (!outage || answering) {
      this.failedAlone(err, outage);
      return;
    }
    const now = this.clock();
    this.openUntil.set(shard ?? WHOLE, now + this.options.retryAfterFailureMs);
    if (this.downSince === undefined) {
      this.downSince = now;
      this.downKey = shard === undefined ? undefined : key;
    }
    if (now - this.lastLog < this.options.logIntervalMs) {
      this.suppressed++;
      return;
    }
    const more = this.suppressed > 0 ? ` (${this.suppressed} more failures since the last report)` : '';
    const what = shard === undefined ? '' : ' its keys';
    this.warn(`${this.unavailable(err, shard)}${more}. Deciding${what} with each policy's onStoreError until it answers again.`, now);
  }

  /**
   * A failure that leaves the store deciding, logged once per cause and interval (digits do not make a new
   * cause): a decision's own at `warn`; a call slow alone while its master answered later ones (a slot that
   * moves, a failover in progress) at `debug`, since the outage, if any, is reported by its own line.
   */
  private failedAlone(err: Error, slow: boolean): void {
    const cause = err.message.replace(/\d+/g, '#').slice(0, 200);
    const now = this.clock();
    const last = this.causeLogged.get(cause);
    if (last !== undefined && now - last < this.options.logIntervalMs) return;
    if (this.causeLogged.size >= 64) this.causeLogged.clear();
    this.causeLogged.set(cause, now);
    const store = this.options.name ?? 'The rate-limit store';
    const alone = 'That decision alone is answered by its onStoreError; the store keeps deciding the others.';
    if (slow) this.logger.debug(`${store}: a decision missed its deadline while later ones were answered: ${describeCause(err)}. ${alone}`);
    else this.logger.warn(`${store}: a decision failed: ${describeCause(err)}. ${alone}`);
  }

  private warn(line: string, now: number): void {
    this.logger.warn(line);
    this.lastLog = now;
    this.suppressed = 0;
    this.reported = true;
  }

  /** What is wrong, naming the store: its last connection error when it has one, else the failure itself. */
  private unavailable(failure: Error, shard?: string): string {
    const { name, connectionError } = this.options;
    const node = shard === undefined ? '' : ` node ${shard}`;
    if (name === undefined) return `Rate-limit store${node} unavailable: ${failure.message}`;
    const cause = connectionError?.();
    return cause ? `${name} is not reachable: ${describeCause(cause)}` : `${name}${node} is unavailable: ${describeCause(failure)}`;
  }

  /**
   * A call made during an outage succeeded: the outage is over. Its end is logged once, and only when its
   * start was (a warning suppressed by `logIntervalMs` gets no recovery line either, so both stay rate-limited).
   * When one shard's failure began it, only that shard's keys answering end it: the shard now serving the
   * failed key (after a failover, another node), not the healthy ones that answered all along.
   */
  private answered(sentAt: number, shard: string | undefined): void {
    if (shard === undefined) {
      if (this.wholeAnsweredSentAt < sentAt) this.wholeAnsweredSentAt = sentAt;
    } else {
      const last = this.answeredSentAt.get(shard);
      if (last === undefined) this.answeredSentAt.set(shard, { sentAt });
      else if (last.sentAt < sentAt) last.sentAt = sentAt;
    }
    const since = this.downSince;
    // A call sent before the outage began says nothing about the store now.
    if (since === undefined || sentAt < since) return;
    if (this.downKey !== undefined && (shard === undefined || shard !== this.shardOf(this.downKey))) return;
    if (this.reported) {
      const seconds = ((this.clock() - since) / 1000).toFixed(1);
      this.logger.log(`${this.options.name ?? 'The rate-limit store'} is answering again after ${seconds} s.`);
    }
    this.downSince = undefined;
    this.downKey = undefined;
    this.reported = false;
  }

  private fallback(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision {
    for (const call of calls) this.answeredLocally.add(call);
    const insured = calls.filter((c) => c.fallback === 'insurance').map((c) => this.insuredCall(c));
    // A fail-closed call rejects the request, so the insurance store must not charge the others.
    const localMode = calls.some((c) => c.fallback === 'fail-closed') ? 'peek' : mode;
    const local = insured.length > 0 ? this.insurance.decideSync(insured, localMode) : undefined;
    let next = 0;
    const verdicts = calls.map((call): StoreVerdict => {
      if (call.fallback === 'insurance') return { ...local!.verdicts[next++], reason: Verdict.StoreUnavailable };
      const allowed = call.fallback === 'fail-open';
      const retryAfterMs = allowed ? 0 : 1_000;
      return {
        allowed,
        remaining: allowed ? call.params.limit : 0,
        resetMs: 0,
        retryAfterMs,
        delayMs: 0,
        moreQuotaMs: retryAfterMs,
        reason: Verdict.StoreUnavailable,
      };
    });
    return { nowMs: this.wallClock(), allowed: verdicts.every((v) => v.allowed), verdicts };
  }

  /** The same call against a share of the limit (at least 1): `insuranceShare`, or 1 / the live instances. */
  private insuredCall(call: RateLimitCall): RateLimitCall {
    const { insuranceShare } = this.options;
    const live = this.liveInstances;
    const share = (n: number) => Math.max(1, Math.floor(insuranceShare === undefined ? n / live : n * insuranceShare));
    return { ...call, params: { ...call.params, limit: share(call.params.limit), burst: share(call.params.burst) } };
  }
}

/** The context of a call under a deadline; its settlers are set with its promise (see ResilientStore.guard). */
function guarded(
  recover: Guarded['recover'],
  calls: readonly RateLimitCall[],
  mode: DecisionMode,
  key: string | undefined,
  shard: string | undefined,
  seen: AnswerWatcher | undefined,
): Guarded {
  return { resolve: settleLater, reject: settleLater, recover, calls, mode, key, shard, seen };
}

/** Placeholder of a {@link Guarded} call's settlers until its promise's executor (run at once) sets them. */
function settleLater(): void {}

/** The context of a call no fallback answers (an operator call, a ping): its caller gets the failure. */
function unrecovered(): Guarded {
  return guarded(undefined, [], 'consume', undefined, undefined, undefined);
}

/** Resolves `call` with its answer, told first to the layer above that watches it (which failing rejects it, as in a `then`). */
function settle(call: Guarded, answer: unknown): void {
  if (call.seen) {
    try {
      call.seen.seen(call.calls, answer as StoreDecision);
    } catch (failure) {
      return call.reject(failure);
    }
  }
  call.resolve(answer);
}
