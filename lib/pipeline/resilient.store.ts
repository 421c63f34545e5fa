import { Logger } from '@nestjs/common';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import { StoreDeadlines, type DeadlineWatcher, type StoreTimings } from './store-deadlines';
import { isOutageOf, penalizeIn, pingStore } from '../stores/store-health';
import { seeing, StoreLayer, type AnswerWatcher, type OutageDescription } from './store-layer';
import { answerNothing, guarded, settle, unrecovered, type Guarded } from './guarded-call';
import { InsuranceFallback } from './insurance-fallback';
import { StoreCircuits } from './store-circuits';
import { StoreOutageLog } from './store-outage-log';
import type {
  DecisionMode,
  InstanceHeartbeat,
  OverrideKeys,
  OverrideRead,
  RateLimitCall,
  RateLimitStore,
  StoreDecision,
} from '../stores/store.interface';

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
  /** Each call's fallback: what answers in the store's place while it is away. */
  private readonly fallbacks: InsuranceFallback;
  private readonly deadlines: StoreDeadlines<Guarded>;
  private readonly circuits: StoreCircuits;
  /** A decision's fallback, for {@link Guarded.recover}: one function for every call. */
  private readonly fallbackAnswer = (calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision => this.fallback(calls, mode);
  /** The current outage, and the log lines that report it. */
  private readonly outages: StoreOutageLog;
  private readonly clock: () => number;

  constructor(
    inner: RateLimitStore,
    private readonly options: ResilientStoreOptions,
  ) {
    super(inner);
    this.clock = options.clock ?? (() => performance.now());
    this.fallbacks = new InsuranceFallback(options.insuranceShare, options.wallClock ?? Date.now);
    this.circuits = new StoreCircuits(options.shardOf, this.clock);
    this.outages = new StoreOutageLog(options, (key) => this.circuits.shardOf(key), this.clock);
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
    const shard = this.circuits.shardOf(key);
    if (this.circuits.isOpen(shard)) {
      const answer = Promise.resolve(this.fallback(calls, mode));
      return seen ? seeing(answer, calls, seen) : answer;
    }
    return this.guard(this.inner.decide(calls, mode), guarded(this.fallbackAnswer, calls, mode, key, shard, seen));
  }

  /** While the circuit is open, the fallback answers at once (see {@link RateLimitStore.decideSync}). */
  override decideSync(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision | undefined {
    // No circuit open, as while the store answers: not even the shard to find.
    if (this.circuits.allClosed) return undefined;
    return this.circuits.isOpen(this.circuits.shardOf(calls[0]?.stateKey)) ? this.fallback(calls, mode) : undefined;
  }

  /**
   * Gives back only what was taken, where it was taken: a call the inner store decided, to it; a call the
   * fallback answered took nothing there (`fail-open`, `fail-closed`) or only from the insurance store
   * (`insurance`): giving it back to the inner store would erase a real count there, and a lease release would
   * only wait out its deadline against a store that is down.
   */
  override async refund(calls: readonly RateLimitCall[]): Promise<void> {
    const decidedByInner = calls.filter((c) => !this.fallbacks.answered(c));
    const insured = calls.filter((c) => c.fallback === 'insurance' && this.fallbacks.answered(c));
    if (decidedByInner.length > 0) await this.bestEffort(decidedByInner);
    if (insured.length > 0) await this.fallbacks.refund(insured);
  }

  /** Always the inner store's: a penalty is never decided by a fallback (it rejects when the store fails). */
  override penalize(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    return this.guard(penalizeIn(this.inner, calls), unrecovered());
  }

  override async block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    await this.guard(this.inner.block(calls, ms), unrecovered());
  }

  override async delete(keys: readonly string[]): Promise<void> {
    await this.fallbacks.delete(keys);
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
      this.outages.notConnected(started, new RateLimitStoreError(`not connected after ${timeoutMs} ms`));
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
  override async readOverrides(
    keys: OverrideKeys,
    knownVersion: string | undefined,
    heartbeat?: InstanceHeartbeat,
    knownDenies?: string,
  ): Promise<OverrideRead> {
    const read = await super.readOverrides(keys, knownVersion, heartbeat, knownDenies);
    this.fallbacks.countLive(read.liveInstances);
    return read;
  }

  /** The outage behind `error` in this layer's words, and what decisions do until the store answers again. */
  override describeOutage(error: unknown): OutageDescription | undefined {
    if (!isOutageOf(this.inner, error)) return undefined;
    const { name } = this.options;
    const store = name === undefined ? 'the rate-limit store' : name.startsWith('Redis') ? 'Redis' : 'the store';
    return {
      what: this.outages.unavailable(error instanceof Error ? error : new Error(String(error))),
      meanwhile: `each policy's onStoreError decides until ${store} answers again (${this.fallbacks.note(store)})`,
    };
  }

  override async close(): Promise<void> {
    this.deadlines.close();
    await this.inner.close();
  }

  /** Refunds and releases must never fail a request: a lost refund only errs on the strict side. */
  private bestEffort(calls: readonly RateLimitCall[]): Promise<void> {
    const key = calls[0]?.stateKey;
    return this.guard(this.inner.refund(calls), guarded(answerNothing, calls, 'consume', key, this.circuits.shardOf(key), undefined));
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

  /**
   * A call sent at `sentAt` failed. An outage of a shard that answered no call sent since opens its circuit and
   * is reported; anything else (see the class) is logged once per cause and fails that call alone.
   */
  private failed(error: unknown, sentAt: number, shard?: string, key?: string): void {
    const err = error instanceof Error ? error : new Error(String(error));
    this.options.onError?.(err);
    const outage = isOutageOf(this.inner, error);
    const answering = this.circuits.lastAnswered(shard) > sentAt;
    if (!outage || answering) {
      this.outages.failedAlone(err, outage);
      return;
    }
    const now = this.clock();
    this.circuits.open(shard, now + this.options.retryAfterFailureMs);
    this.outages.outage(err, now, shard, key);
  }

  /** A call sent at `sentAt` was answered: the shard is up, and an outage it was in is over (see {@link StoreOutageLog.answered}). */
  private answered(sentAt: number, shard: string | undefined): void {
    this.circuits.answered(sentAt, shard);
    this.outages.answered(sentAt, shard);
  }

  /** Each call's fallback answers in the store's place (see {@link InsuranceFallback}). */
  private fallback(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision {
    return this.fallbacks.answer(calls, mode);
  }
}
