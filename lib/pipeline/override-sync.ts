import { randomBytes } from 'node:crypto';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { RateLimitHooks } from '../interfaces/module-options.interface';
import type { RateLimitOverride, RateLimitOverrideEntry } from '../interfaces/override.interface';
import { MAX_OVERRIDES, overrideField, overrideJson, parseStoredOverride } from '../policy/runtime-overrides';
import { IntervalWarning } from '../shared/interval-warning';
import { StoreLayer } from './store-layer';
import { entryOf, OverrideCopy } from './override-copy';
import { MemoryStore } from '../stores/memory/memory.store';
import type { RateLimitDenyList } from './deny-list';
import type { InstanceHeartbeat, OverrideKeys, OverrideWrite, OverrideWriteResult, RateLimitStore } from '../stores/store.interface';

// The trackers' remembered matches live with the copy they are matched against; routes and services import them from here.

/**
 * How often each instance asks the store whether the overrides changed, ms: one small script call (a `GET` and
 * `TIME` while nothing changed), so a change made on any instance is applied everywhere within two polls (1 s).
 */
export const OVERRIDE_POLL_MS = 500;

/**
 * How long an instance counts as live after its last poll, ms: each poll records this instance in the store (a
 * heartbeat), and the count of instances seen live within this time divides each limit among them while the
 * store is away (the default `insuranceShare`; see ResilientStore).
 */
export const INSTANCE_LIVE_MS = 60_000;

/** Longest the app's startup waits for the overrides to load (they keep loading in the background after it). */
const STARTUP_LOAD_MS = 3_000;

/** What {@link RateLimitOverrides} needs from the module options. */
export interface RateLimitOverridesOptions {
  /** The module's key prefix. @default 'rl' */
  prefix?: string;
  /** `hooks.override` hears each change applied (read when it happens: the event bus sets it while someone listens). */
  hooks?: RateLimitHooks;
}

/**
 * The runtime overrides this instance applies (`RateLimitAdmin.setOverride`), and their synchronisation with the
 * store, where they live (Redis: shared by every instance and kept across restarts; the memory store: this
 * process only).
 *
 * Each instance holds a copy (an {@link OverrideTable}: what a decision consults, with no store round trip) and,
 * on a remote store, asks the store every {@link OVERRIDE_POLL_MS} whether the set's version moved, reading the
 * whole set only when it did (one timer per instance, `unref`ed, stopped on shutdown; none on the memory store,
 * which only this instance writes). The copy is loaded before the app serves ({@link start}), and an instance's own
 * write applies on it at once. `until` is on the store's clock: each read's `TIME` turns it into an end on this
 * instance's clock. A failed read keeps the last copy (a rate-limited warning says so).
 */
export class RateLimitOverrides extends OverrideCopy {
  private readonly keys: OverrideKeys;
  /**
   * What each read records of this instance: a random id, live for {@link INSTANCE_LIVE_MS} after the read. The
   * `/` tells it from a 1.0 instance's id (base64url alone), which the carry-over of 1.0 deny keys looks for.
   */
  private readonly heartbeat: InstanceHeartbeat = { id: `${randomBytes(9).toString('base64url')}/1`, liveMs: INSTANCE_LIVE_MS };
  private readonly unreadable = new IntervalWarning('RateLimitOverrides');
  /** The store's version of the set this copy matches; `undefined` until the first read. */
  private version: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Reads and writes, one at a time: a read sent before a write must not be applied after it. */
  private queue: Promise<unknown> = Promise.resolve();
  private busy = 0;

  /**
   * @param denies the deny list, whose channel the same poll reads on a remote store (every key in the
   *   overrides' hash tag, `<prefix>:{overrides}:denies…`)
   */
  constructor(
    private readonly store: RateLimitStore,
    private readonly options: RateLimitOverridesOptions = {},
    private readonly denies?: RateLimitDenyList,
  ) {
    super(store instanceof MemoryStore ? () => store.now() : () => performance.now(), options);
    const prefix = options.prefix ?? 'rl';
    const tag = `${prefix}:{overrides}`;
    this.keys = { overrides: tag, version: `${tag}:v`, expiries: `${tag}:until`, instances: `${tag}:instances` };
    if (denies !== undefined && !store.inProcess) {
      this.keys.denies = {
        seq: `${tag}:denies:seq`,
        denies: `${tag}:denies`,
        log: `${tag}:denies:log`,
        ends: `${tag}:denies:until`,
        carryOver: `${tag}:denies:carry-over`,
      };
      const exclusive = <T>(work: () => Promise<T>) => this.exclusive(work);
      denies.connect({ keys: this.keys, exclusive, refresh: () => this.refresh(), liveMs: INSTANCE_LIVE_MS }, prefix);
    }
  }

  /**
   * Loads the overrides before the app serves (a failure is warned about and retried by the next poll), then,
   * on a remote store, polls every {@link OVERRIDE_POLL_MS}. A store that is not `connected` is not waited for:
   * the load goes on in the background, and startup has already waited for the connection once.
   */
  async start(connected = true): Promise<void> {
    const loaded = this.exclusive(() => this.read(true))
      // The denies 1.0 instances wrote, carried over before this instance serves when it is the first 1.1 one.
      .then(async () => {
        if (this.keys.denies !== undefined && (await this.denies!.carryOverNow())) await this.refresh();
      })
      .catch((error: unknown) => this.warnUnreadable(error));
    // A client that queues commands while disconnected (an ioredis client of yours, by default) would hold the
    // app's startup as long as Redis is away: the load is waited for a while, then goes on in the background.
    if (connected) {
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, STARTUP_LOAD_MS)));
      await Promise.race([loaded, waited]);
      clearTimeout(timer);
    }
    if (this.timer === undefined && !this.store.inProcess) {
      this.timer = setInterval(() => this.poll(), OVERRIDE_POLL_MS);
      this.timer.unref();
    }
  }

  /** Stops polling (the module is closing the store). */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Sets the override of `policy` for `pattern` (the tracker pattern as matched; `tracker` as written) in the
   * store, and applies it here at once. `until`: store ms, or `undefined`.
   */
  async set(policy: string, pattern: string, tracker: string, override: RateLimitOverride, until: number | undefined): Promise<void> {
    const json = overrideJson(tracker, normalised(override), until);
    await this.exclusive(async () => {
      const field = overrideField(policy, pattern);
      const result = await this.write('setOverride', { field, value: json, untilMs: until ?? 0, maxCount: MAX_OVERRIDES });
      if (result.status === 'past') {
        throw new RateLimitConfigError(
          `setOverride: until: ${new Date(until!).toISOString()} is not in the future (the store's clock reads ${new Date(result.nowMs).toISOString()}).`,
        );
      }
      if (result.status === 'full') {
        throw new RateLimitConfigError(
          `setOverride: ${MAX_OVERRIDES} overrides are set already, the most kept; remove some (removeOverride), or give them an end (until), before adding more.`,
        );
      }
      const entry = parseStoredOverride(field, json, result.nowMs, this.clock());
      if (entry) this.put(entry, true);
      await this.caughtUp(result.version);
    });
  }

  /** Removes the override of `policy` for `pattern` from the store, and here at once. */
  async remove(policy: string, pattern: string): Promise<void> {
    await this.exclusive(async () => {
      const field = overrideField(policy, pattern);
      const result = await this.write('removeOverride', { field, value: undefined, untilMs: 0, maxCount: MAX_OVERRIDES });
      const entry = this.table.get(policy, pattern);
      if (entry) this.drop(entry, 'removed', true);
      await this.caughtUp(result.version);
    });
  }

  /** Every override in force, read from the store (so also those set elsewhere a moment ago), applied here too. */
  async list(): Promise<RateLimitOverrideEntry[]> {
    return this.exclusive(async () => {
      this.version = undefined;
      await this.read(false).catch((error: unknown) => {
        throw storeFailed('listOverrides', 'the overrides could not be read', error);
      });
      const listed: RateLimitOverrideEntry[] = [];
      for (const entry of this.table.entries()) listed.push(entryOf(entry));
      return listed.sort((a, b) => (a.policy === b.policy ? compare(a.tracker, b.tracker) : compare(a.policy, b.policy)));
    });
  }

  /** One poll: skipped while a read or write is on its way (a hung store is asked again once it answers). */
  private poll(): void {
    if (this.busy > 0) return;
    this.refresh().catch((error: unknown) => this.warnUnreadable(error));
  }

  /** Reads what changed now (the overrides and, on a remote store, the denies), after the reads and writes queued. */
  refresh(): Promise<void> {
    return this.exclusive(() => this.read(false));
  }

  /**
   * Reads the set when its version moved and applies it; then drops the overrides that ended meanwhile. The
   * deny list gets what changed of its denies from the same call.
   */
  private async read(initial: boolean): Promise<void> {
    const read = await this.store.readOverrides!(this.keys, this.version, this.heartbeat, this.denies?.known);
    if (read.entries !== undefined) this.replace(read, initial);
    this.version = read.version;
    if (read.denies !== undefined) this.denies!.apply(read.denies, read.nowMs);
    this.sweep();
  }

  /** After this instance's write: when another write came between, the set is read again now. */
  private async caughtUp(version: string): Promise<void> {
    if (this.version !== undefined && Number(version) === Number(this.version) + 1) this.version = version;
    else {
      this.version = undefined;
      await this.read(false);
    }
  }

  /** One write; a failure is a {@link RateLimitStoreError} saying the change may or may not have been made. */
  private async write(what: string, write: OverrideWrite): Promise<OverrideWriteResult> {
    if (!this.store.writeOverride) {
      throw new RateLimitConfigError(`${what}: this rate-limit store keeps no runtime overrides (the memory and Redis stores do).`);
    }
    try {
      return await this.store.writeOverride(this.keys, write);
    } catch (error) {
      if (error instanceof RateLimitConfigError) throw error;
      throw storeFailed(what, 'the change may or may not have been made (call again, or check listOverrides())', error);
    }
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    this.busy++;
    const run = this.queue.then(work, work);
    this.queue = run.then(
      () => this.busy--,
      () => this.busy--,
    );
    return run;
  }

  /**
   * A poll that failed, in the library's words: what is wrong with the store (named, with the cause, as the store's
   * own outage line has it), that the overrides read last stay in force, and what decisions do meanwhile.
   */
  private warnUnreadable(error: unknown): void {
    this.unreadable.warn(() => {
      const size = this.table.size;
      const held =
        size === 0
          ? 'no override is in force (none was set at the last read)'
          : size === 1
            ? 'the 1 override read last stays in force'
            : `the ${size} overrides read last stay in force`;
      const outage = this.store instanceof StoreLayer ? this.store.describeOutage(error) : undefined;
      if (outage === undefined) {
        const cause = (error as Error)?.message ?? String(error);
        return `Runtime overrides could not be read: the rate-limit store failed (${cause}). They are read again every ${OVERRIDE_POLL_MS} ms; meanwhile ${held}.`;
      }
      return `Runtime overrides could not be read: ${outage.what}. They are read again every ${OVERRIDE_POLL_MS} ms; meanwhile ${held}, and ${outage.meanwhile}.`;
    });
  }
}

/** A store failure of an override call, naming the call, what it means, and the store's own error. */
function storeFailed(what: string, meaning: string, error: unknown): RateLimitStoreError {
  if (error instanceof RateLimitStoreError) return error;
  const message = (error as Error)?.message ?? String(error);
  return new RateLimitStoreError(`${what}: the rate-limit store failed (${message}); ${meaning}.`, { cause: error });
}

/** The override's fields in a fixed order, without those left out. */
function normalised({ limit, window, burst }: RateLimitOverride): RateLimitOverride {
  const override: RateLimitOverride = {};
  if (limit !== undefined) override.limit = limit;
  if (window !== undefined) override.window = window;
  if (burst !== undefined) override.burst = burst;
  return override;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
