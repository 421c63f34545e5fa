import { Logger } from '@nestjs/common';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import { MemoryStore } from './memory.store';
import { describeCause } from './store-description';
import { penalizeIn, pingStore } from './store-health';
import type { DecisionMode, RateLimitCall, RateLimitStore, StoreDecision, StoreVerdict } from './store.interface';

/** Options of {@link ResilientStore}. */
export interface ResilientStoreOptions {
  /** Deadline of one decision, ms. */
  timeoutMs: number;
  /** Share of each limit an instance may grant on its own while the store is away (`insurance`). */
  insuranceShare: number;
  /** Least interval between two store-error log lines, ms. */
  logIntervalMs: number;
  /** After a failure, decisions skip the store for this long before trying it again, ms. */
  retryAfterFailureMs: number;
  /** Called on every store failure (already rate-limited logging is separate). */
  onError?: (error: Error) => void;
  /** The primary store as log lines name it (`Redis at 127.0.0.1:6379`); without it, lines say "rate-limit store". */
  name?: string;
  /** Why the primary store cannot be reached, when it knows (its client's last connection error). */
  connectionError?: () => Error | undefined;
  /**
   * Which part of the primary store holds a key (for a Redis Cluster, the master serving its slot), so that a
   * failure opens the circuit for that part's keys only and the others keep deciding with the store. Absent,
   * or `undefined` for a key: one circuit for the whole store.
   */
  shardOf?: (key: string) => string | undefined;
  /** Time source, ms. */
  clock?: () => number;
}

/** A call in flight: its deadline, and how it ends when it misses it. */
interface Pending {
  deadline: number;
  settled: boolean;
  fail: (error: unknown) => void;
}

function rethrow(error: unknown): never {
  throw error;
}

/**
 * Keeps a slow or failing store from taking requests down with it. Every decision has a deadline; a
 * failure or a missed deadline opens a short circuit during which decisions do not wait for the store at
 * all, then the next decision tries it again (so recovery is automatic). Meanwhile each call's `fallback`
 * decides: allow, reject, or the in-process insurance store with a share of the limit. With `shardOf` (a Redis
 * Cluster), each master has its own circuit: one master's outage sends only its keys to the fallback.
 *
 * One shared timer enforces deadlines (none per request), and only while decisions are in flight. An outage
 * is logged when it begins (at most once per `logIntervalMs`, naming the store and the cause) and, once
 * reported, when the store answers again; on the request path that costs one check.
 */
export class ResilientStore implements RateLimitStore {
  private readonly logger = new Logger('RateLimit');
  private readonly insurance: MemoryStore;
  /** Calls a fallback answered: they took nothing from the primary store, so their refunds never go there. */
  private readonly answeredLocally = new WeakSet<RateLimitCall>();
  private readonly pending: Pending[] = [];
  private ticker: NodeJS.Timeout | undefined;
  /** Until when decisions skip the whole store (or, with `shardOf`, the keys of no known shard). */
  private openUntil = 0;
  /** The same per shard (`shardOf`): one entry per shard that ever failed, so a handful. */
  private readonly shardOpenUntil = new Map<string, number>();
  private lastLog = -Infinity;
  private suppressed = 0;
  /** When the current outage began (a failure, or no connection at startup); undefined while the store answers. */
  private downSince: number | undefined;
  /** A key whose failure began the current outage; whichever shard serves it now answering ends the outage. */
  private downKey: string | undefined;
  /** Whether a warning reported the current outage, so its end is reported too (once). */
  private reported = false;
  private readonly clock: () => number;

  constructor(
    private readonly primary: RateLimitStore,
    private readonly options: ResilientStoreOptions,
  ) {
    this.clock = options.clock ?? Date.now;
    this.insurance = new MemoryStore({ clock: this.clock });
  }

  decide(calls: readonly RateLimitCall[], mode: DecisionMode): Promise<StoreDecision> {
    // All keys of one decision share a hash tag, so its first key's shard is the decision's.
    const key = calls[0]?.stateKey;
    const shard = this.shardOf(key);
    if (this.isOpen(shard)) return Promise.resolve(this.fallback(calls, mode));
    return this.withDeadline(
      this.primary.decide(calls, mode),
      (error) => {
        this.failed(error, shard, key);
        return this.fallback(calls, mode);
      },
      shard,
    );
  }

  /** While the circuit is open, the fallback answers at once (see {@link RateLimitStore.decideSync}). */
  decideSync(calls: readonly RateLimitCall[], mode: DecisionMode): StoreDecision | undefined {
    return this.isOpen(this.shardOf(calls[0]?.stateKey)) ? this.fallback(calls, mode) : undefined;
  }

  /**
   * Gives back only what was taken, where it was taken: a call the primary store decided, to it; a call the
   * fallback answered took nothing there (`fail-open`, `fail-closed`) or only from the insurance store
   * (`insurance`): giving it back to the primary would erase a real count there, and a lease release would
   * only wait out its deadline against a store that is down.
   */
  async refund(calls: readonly RateLimitCall[]): Promise<void> {
    const primary = calls.filter((c) => !this.answeredLocally.has(c));
    const insured = calls.filter((c) => c.fallback === 'insurance' && this.answeredLocally.has(c));
    if (primary.length > 0) await this.bestEffort(() => this.primary.refund(primary));
    if (insured.length > 0) await this.insurance.refund(insured.map((c) => this.insuredCall(c)));
  }

  /** Always the primary store's: a penalty is never decided by a fallback (it rejects when the store fails). */
  penalize(calls: readonly RateLimitCall[]): Promise<StoreDecision> {
    return this.withDeadline(penalizeIn(this.primary, calls));
  }

  async block(calls: readonly RateLimitCall[], ms: number): Promise<void> {
    await this.withDeadline(this.primary.block(calls, ms));
  }

  async delete(keys: readonly string[]): Promise<void> {
    await this.insurance.delete(keys);
    await this.withDeadline(this.primary.delete(keys));
  }

  /** The primary store's `PING` within `timeoutMs`; a failed ping is not a decision failure (no fallback window, no `onError`). */
  ping(): Promise<void> {
    return this.withDeadline(pingStore(this.primary));
  }

  /** The primary store's `ready`; when it is not, warns (naming the store and the cause) and starts an outage. */
  async ready(timeoutMs: number): Promise<boolean> {
    const started = this.clock();
    const ready = (await this.primary.ready?.(timeoutMs)) ?? true;
    if (!ready) {
      this.downSince ??= started;
      const line = this.unavailable(new RateLimitStoreError(`not connected after ${timeoutMs} ms`));
      this.warn(`${line}. Starting anyway; deciding with each policy's onStoreError until it answers.`, this.clock());
    }
    return ready;
  }

  async close(): Promise<void> {
    clearInterval(this.ticker);
    this.ticker = undefined;
    for (const entry of this.pending.splice(0)) {
      if (entry.settled) continue;
      entry.settled = true;
      entry.fail(new RateLimitStoreError('The rate-limit store was closed.'));
    }
    await this.primary.close();
  }

  /** Refunds and releases must never fail a request: a lost refund only errs on the strict side. */
  private async bestEffort(work: () => Promise<void>): Promise<void> {
    try {
      await this.withDeadline(work());
    } catch (error) {
      this.failed(error);
    }
  }

  /**
   * `work`'s result when it settles within `timeoutMs`; otherwise, or when it fails, what `recover` makes of
   * the error (rethrowing by default). One promise per call: it is on every decision's path. `shard`: the
   * shard the call went to, when known (see {@link answered}).
   */
  private withDeadline<T>(work: Promise<T>, recover: (error: unknown) => T = rethrow, shard?: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = {
        deadline: this.clock() + this.options.timeoutMs,
        settled: false,
        fail: (error) => {
          try {
            resolve(recover(error));
          } catch (failure) {
            reject(failure);
          }
        },
      };
      this.pending.push(entry);
      this.startTicker();
      work.then(
        (value) => {
          if (entry.settled) return;
          entry.settled = true;
          if (this.downSince !== undefined) this.answered(entry.deadline - this.options.timeoutMs, shard);
          resolve(value);
        },
        (error: unknown) => {
          if (entry.settled) return;
          entry.settled = true;
          entry.fail(error);
        },
      );
    });
  }

  /** Deadlines are all `timeoutMs` long, so the queue is ordered by deadline: expire from its head. */
  private startTicker(): void {
    if (this.ticker) return;
    const every = Math.max(1, Math.min(10, Math.floor(this.options.timeoutMs / 4)));
    this.ticker = setInterval(() => {
      const now = this.clock();
      while (this.pending.length > 0 && (this.pending[0].settled || this.pending[0].deadline <= now)) {
        const entry = this.pending.shift()!;
        if (!entry.settled) {
          entry.settled = true;
          entry.fail(new RateLimitStoreError(`The rate-limit store did not answer within storeTimeoutMs (${this.options.timeoutMs} ms).`));
        }
      }
      if (this.pending.length === 0) {
        clearInterval(this.ticker);
        this.ticker = undefined;
      }
    }, every);
    this.ticker.unref();
  }

  /** The shard holding `key` (`shardOf`); undefined without `shardOf`, or for a key of no known shard. */
  private shardOf(key: string | undefined): string | undefined {
    return key === undefined ? undefined : this.options.shardOf?.(key);
  }

  /** Whether decisions for the shard (undefined: the whole store) skip the store for now. */
  private isOpen(shard: string | undefined): boolean {
    return this.clock() < (shard === undefined ? this.openUntil : (this.shardOpenUntil.get(shard) ?? 0));
  }

  /** Opens the circuit of the shard that failed (of the whole store when unknown), and reports the outage. */
  private failed(error: unknown, shard?: string, key?: string): void {
    const err = error instanceof Error ? error : new Error(String(error));
    const now = this.clock();
    if (shard === undefined) this.openUntil = now + this.options.retryAfterFailureMs;
    else this.shardOpenUntil.set(shard, now + this.options.retryAfterFailureMs);
    this.options.onError?.(err);
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
  private answered(callStarted: number, shard: string | undefined): void {
    const since = this.downSince!;
    // A call sent before the outage began says nothing about the store now.
    if (callStarted < since) return;
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
      if (call.fallback === 'insurance') return { ...local!.verdicts[next++], reason: 3 };
      const allowed = call.fallback === 'fail-open';
      const retryAfterMs = allowed ? 0 : 1_000;
      return {
        allowed,
        remaining: allowed ? call.params.limit : 0,
        resetMs: 0,
        retryAfterMs,
        delayMs: 0,
        moreQuotaMs: retryAfterMs,
        reason: 3,
      };
    });
    return { nowMs: this.clock(), allowed: verdicts.every((v) => v.allowed), verdicts };
  }

  /** The same call against a share of the limit (at least 1). */
  private insuredCall(call: RateLimitCall): RateLimitCall {
    const share = (n: number) => Math.max(1, Math.floor(n * this.options.insuranceShare));
    return { ...call, params: { ...call.params, limit: share(call.params.limit), burst: share(call.params.burst) } };
  }
}
