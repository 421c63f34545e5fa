import { Logger } from '@nestjs/common';
import { describeCause } from '../stores/store-description';

/** What {@link StoreOutageLog} needs of `ResilientStoreOptions`. */
export interface StoreOutageLogOptions {
  /** Least interval between two store-error log lines, ms. */
  logIntervalMs: number;
  /** The inner store as log lines name it; without it, lines say "rate-limit store". */
  name?: string;
  /** Why the inner store cannot be reached, when it knows (its client's last connection error). */
  connectionError?: () => Error | undefined;
}

/**
 * The outage state of {@link ResilientStore} and its log lines: an outage is logged when it begins (at most
 * once per `logIntervalMs`, naming the store and the cause) and, once reported, when the store answers again;
 * a decision's own failure once per cause and interval. Kept apart so the store reads as what it decides.
 */
export class StoreOutageLog {
  private readonly logger = new Logger('RateLimit');
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

  /**
   * @param shardOf the shard now holding a key (see `StoreCircuits.shardOf`)
   * @param clock monotonic time source, ms
   */
  constructor(
    private readonly options: StoreOutageLogOptions,
    private readonly shardOf: (key: string | undefined) => string | undefined,
    private readonly clock: () => number,
  ) {}

  /** The store was not connected at startup (`started`, monotonic ms): an outage begins, and is reported. */
  notConnected(started: number, error: Error): void {
    this.downSince ??= started;
    const line = this.unavailable(error);
    this.warn(`${line}. Starting anyway; deciding with each policy's onStoreError until it answers.`, this.clock());
  }

  /**
   * An outage of the shard (undefined: the whole store) began or goes on at `now`; reported at most once per
   * `logIntervalMs`, with the failures suppressed since the last report counted.
   */
  outage(err: Error, now: number, shard?: string, key?: string): void {
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
  failedAlone(err: Error, slow: boolean): void {
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

  /** What is wrong, naming the store: its last connection error when it has one, else the failure itself. */
  unavailable(failure: Error, shard?: string): string {
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
  answered(sentAt: number, shard: string | undefined): void {
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

  private warn(line: string, now: number): void {
    this.logger.warn(line);
    this.lastLog = now;
    this.suppressed = 0;
    this.reported = true;
  }
}
