import { randomBytes } from 'node:crypto';
import type { AlgorithmParams } from '../algorithms/algorithm.interface';
import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RateLimitStoreError } from '../errors/rate-limit-store.error';
import type { RateLimitHooks } from '../interfaces/module-options.interface';
import type { RateLimitOverride, RateLimitOverrideEntry, RateLimitOverrideEvent } from '../interfaces/override.interface';
import type { CompiledPolicy } from '../policy/compile-policy';
import {
  MAX_OVERRIDES,
  OverrideTable,
  overrideField,
  overrideJson,
  overriddenParams,
  parseStoredOverride,
  type OverrideEntry,
} from '../policy/runtime-overrides';
import { IntervalWarning } from '../shared/interval-warning';
import { StoreLayer } from './store-layer';
import { MemoryStore } from '../stores/memory/memory.store';
import type {
  InstanceHeartbeat,
  OverrideKeys,
  OverrideRead,
  OverrideWrite,
  OverrideWriteResult,
  RateLimitStore,
} from '../stores/store.interface';

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
 * The overrides one tracker matched, for up to two policy names, at one generation of the table: what a decision
 * for a tracker seen before reads instead of looking the tracker up in the table again (a comparison or two,
 * where a lookup among 10,000 overrides costs cache misses). Fields of whatever remembers the tracker's key
 * prefix (the guard's and the service's tracker memos), so they cost no object of their own; stale as soon as the
 * table changes. Start them with {@link UnmatchedOverrides}.
 */
export interface TrackerOverrides {
  /** The table's generation the names below were matched at; -1: none yet. */
  overridesAt: number;
  name0: string | undefined;
  entry0: OverrideEntry | undefined;
  name1: string | undefined;
  entry1: OverrideEntry | undefined;
}

/**
 * {@link TrackerOverrides} of a tracker not matched yet: the base class of the records that remember trackers,
 * so each is made with all its fields at once (spreading them into an object literal cost a runtime call per new
 * tracker).
 */
export class UnmatchedOverrides implements TrackerOverrides {
  overridesAt = -1;
  name0: string | undefined = undefined;
  entry0: OverrideEntry | undefined = undefined;
  name1: string | undefined = undefined;
  entry1: OverrideEntry | undefined = undefined;
}

/** One policy's request as the overrides see it (a `PolicyRequest`'s shape; the engine's type is defined above this file). */
interface OverridableRequest {
  compiled: CompiledPolicy;
  params: AlgorithmParams;
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
export class RateLimitOverrides {
  /** The overrides in force here. */
  readonly table = new OverrideTable();
  private readonly keys: OverrideKeys;
  /** What each read records of this instance: a random id, live for {@link INSTANCE_LIVE_MS} after the read. */
  private readonly heartbeat: InstanceHeartbeat = { id: randomBytes(9).toString('base64url'), liveMs: INSTANCE_LIVE_MS };
  /** Local time, ms: the memory store's own clock (a test clock moves `until` too), else a monotonic one. */
  private readonly clock: () => number;
  private readonly unreadable = new IntervalWarning('RateLimitOverrides');
  /** The store's version of the set this copy matches; `undefined` until the first read. */
  private version: string | undefined;
  /** Moves on with every change to {@link table}: what a {@link TrackerOverrides} was found at. */
  private generation = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Reads and writes, one at a time: a read sent before a write must not be applied after it. */
  private queue: Promise<unknown> = Promise.resolve();
  private busy = 0;
  /** The soonest end of an override held, local ms (`Infinity`: none ends). */
  private nextEndAt = Infinity;

  constructor(
    private readonly store: RateLimitStore,
    private readonly options: RateLimitOverridesOptions = {},
  ) {
    const prefix = options.prefix ?? 'rl';
    this.keys = {
      overrides: `${prefix}:{overrides}`,
      version: `${prefix}:{overrides}:v`,
      expiries: `${prefix}:{overrides}:until`,
      instances: `${prefix}:{overrides}:instances`,
    };
    this.clock = store instanceof MemoryStore ? () => store.now() : () => performance.now();
  }

  /** Whether any override is held: while none is, a decision asks nothing more. */
  get active(): boolean {
    return this.table.size > 0;
  }

  /** Whether policy `name` has an override (for any tracker). */
  has(name: string): boolean {
    return this.table.has(name);
  }

  /**
   * The override in force for policy `name` and `tracker`, the most specific one (exact, longest prefix, `*`);
   * `undefined` when none. One that has ended is dropped here (reported `expired`) and the next one tried.
   */
  match(name: string, tracker: string): OverrideEntry | undefined {
    let entry = this.table.match(name, tracker);
    while (entry !== undefined && entry.endsAt !== Infinity && this.clock() >= entry.endsAt) {
      this.drop(entry, 'expired', false);
      entry = this.table.match(name, tracker);
    }
    return entry;
  }

  /**
   * {@link match}, remembered in `seen` (the tracker's own) until the table changes: a tracker seen before costs a
   * comparison of the table's generation and of policy names, not a lookup among the overrides.
   */
  matchFor(seen: TrackerOverrides, name: string, tracker: string): OverrideEntry | undefined {
    const current = seen.overridesAt === this.generation;
    if (current && (seen.name0 === name || seen.name1 === name)) {
      const entry = seen.name0 === name ? seen.entry0 : seen.entry1;
      if (entry === undefined || entry.endsAt === Infinity || this.clock() < entry.endsAt) return entry;
    }
    const entry = this.match(name, tracker);
    if (seen.overridesAt !== this.generation) {
      seen.overridesAt = this.generation;
      seen.name1 = seen.entry1 = undefined;
      seen.name0 = name;
      seen.entry0 = entry;
    } else if (seen.name0 !== name) {
      // A third name takes the second place: a route decides its policies in the same order every time.
      seen.name1 = name;
      seen.entry1 = entry;
    }
    return entry;
  }

  /**
   * `requests` with the override matching `tracker` applied to each policy that has one; `requests` itself
   * (nothing allocated) when none does. `seen`: the tracker's remembered matches, when it has them.
   */
  apply<R extends OverridableRequest>(requests: readonly R[], tracker: string, seen?: TrackerOverrides): readonly R[] {
    if (this.table.size === 0) return requests;
    let applied: R[] | undefined;
    for (let i = 0; i < requests.length; i++) {
      const request = requests[i];
      const name = request.compiled.name;
      const entry = seen === undefined ? this.match(name, tracker) : this.matchFor(seen, name, tracker);
      if (entry === undefined) continue;
      const params = this.params(request.compiled, request.params, entry);
      if (params === request.params) continue;
      applied ??= requests.slice();
      applied[i] = { ...request, params };
    }
    return applied ?? requests;
  }

  /** `params` of `compiled` with `entry` applied; remembered per entry for params that never change. */
  params(compiled: CompiledPolicy, params: AlgorithmParams, entry: OverrideEntry): AlgorithmParams {
    if (params.periods !== undefined) return overriddenParams(compiled, params, entry);
    return this.built(entry, params, () => overriddenParams(compiled, params, entry));
  }

  /** What `make` builds for `entry` from `from` (an object that never changes), built once per entry. */
  built<T>(entry: OverrideEntry, from: object, make: () => T): T {
    const built = (entry.built ??= new WeakMap());
    let value = built.get(from) as T | undefined;
    if (value === undefined) built.set(from, (value = make()));
    return value;
  }

  /**
   * Loads the overrides before the app serves (a failure is warned about and retried by the next poll), then,
   * on a remote store, polls every {@link OVERRIDE_POLL_MS}. A store that is not `connected` is not waited for:
   * the load goes on in the background, and startup has already waited for the connection once.
   */
  async start(connected = true): Promise<void> {
    const loaded = this.exclusive(() => this.read(true)).catch((error: unknown) => this.warnUnreadable(error));
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
    this.exclusive(() => this.read(false)).catch((error: unknown) => this.warnUnreadable(error));
  }

  /** Reads the set when its version moved and applies it; then drops the overrides that ended meanwhile. */
  private async read(initial: boolean): Promise<void> {
    const read = await this.store.readOverrides!(this.keys, this.version, this.heartbeat);
    if (read.entries !== undefined) this.replace(read, initial);
    this.version = read.version;
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

  /** The set as read replaces this copy; each difference is reported, but for the load at startup. */
  private replace({ entries, nowMs }: OverrideRead, initial: boolean): void {
    const localNow = this.clock();
    const fields = new Set<string>();
    for (const [field, json] of entries!) {
      if (fields.size >= MAX_OVERRIDES) break;
      const entry = parseStoredOverride(field, json, nowMs, localNow);
      if (entry === undefined || (entry.until !== undefined && entry.until <= nowMs)) continue;
      fields.add(field);
      const held = this.table.get(entry.policy, entry.pattern);
      if (held?.json !== json) this.put(entry, false, initial);
    }
    const gone: OverrideEntry[] = [];
    for (const entry of this.table.entries()) if (!fields.has(overrideField(entry.policy, entry.pattern))) gone.push(entry);
    for (const entry of gone) this.drop(entry, entry.until !== undefined && entry.until <= nowMs ? 'expired' : 'removed', false, initial);
  }

  /** Drops the overrides whose end has passed here (checked only once the soonest end is due). */
  private sweep(): void {
    if (this.nextEndAt === Infinity || this.clock() < this.nextEndAt) return;
    const now = this.clock();
    const ended: OverrideEntry[] = [];
    let next = Infinity;
    for (const entry of this.table.entries()) {
      if (entry.endsAt <= now) ended.push(entry);
      else if (entry.endsAt < next) next = entry.endsAt;
    }
    for (const entry of ended) this.drop(entry, 'expired', false);
    this.nextEndAt = next;
  }

  private put(entry: OverrideEntry, local: boolean, quiet = false): void {
    this.table.set(entry);
    this.generation++;
    if (entry.endsAt < this.nextEndAt) this.nextEndAt = entry.endsAt;
    if (!quiet) this.report('applied', entry, local);
  }

  private drop(entry: OverrideEntry, action: 'removed' | 'expired', local: boolean, quiet = false): void {
    if (this.table.get(entry.policy, entry.pattern) !== entry) return;
    this.table.delete(entry.policy, entry.pattern);
    this.generation++;
    if (!quiet) this.report(action, entry, local);
  }

  private report(action: RateLimitOverrideEvent['action'], entry: OverrideEntry, local: boolean): void {
    const hook = this.options.hooks?.override;
    if (hook === undefined) return;
    try {
      hook({ action, local, ...entryOf(entry) });
    } catch {
      // The event bus logs its listeners' failures; a hook given by hand must not fail an override either.
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

/** What listOverrides and events report of an entry: the pattern as set, the override as set, its end. */
function entryOf({ policy, tracker, override, until }: OverrideEntry): RateLimitOverrideEntry {
  return until === undefined ? { policy, tracker, override } : { policy, tracker, override, until };
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
