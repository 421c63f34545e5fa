import type { AlgorithmParams } from '../algorithms/algorithm.interface';
import type { RateLimitHooks } from '../interfaces/module-options.interface';
import type { RateLimitOverrideEntry, RateLimitOverrideEvent } from '../interfaces/override.interface';
import type { CompiledPolicy } from '../policy/compile-policy';
import { MAX_OVERRIDES, overrideField, overriddenParams, parseStoredOverride, type OverrideEntry } from '../policy/runtime-overrides';
import { OverrideTable } from '../policy/override-table';
import type { OverrideRead } from '../stores/store.interface';

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
 * The copy of the runtime overrides this instance holds, and how a decision reads it: an {@link OverrideTable}
 * consulted with no store round trip, the overrides ended here dropped, and each change reported to
 * `hooks.override`. {@link RateLimitOverrides} keeps it in step with the store; kept apart so that what a
 * decision reads and how the store is polled are each read on their own.
 */
export class OverrideCopy {
  /** The overrides in force here. */
  readonly table = new OverrideTable();
  /** Moves on with every change to {@link table}: what a {@link TrackerOverrides} was found at. */
  private generation = 0;
  /** The soonest end of an override held, local ms (`Infinity`: none ends). */
  private nextEndAt = Infinity;

  /**
   * @param clock local time, ms: the memory store's own clock (a test clock moves `until` too), else a monotonic one
   * @param events whose `hooks.override` hears each change applied (read when it happens)
   */
  constructor(
    protected readonly clock: () => number,
    private readonly events: { hooks?: RateLimitHooks },
  ) {}

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

  /** The set as read replaces this copy; each difference is reported, but for the load at startup. */
  protected replace({ entries, nowMs }: OverrideRead, initial: boolean): void {
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
  protected sweep(): void {
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

  /** Holds `entry` (replacing one for the same policy and pattern) and reports it, unless `quiet` (the load at startup). */
  protected put(entry: OverrideEntry, local: boolean, quiet = false): void {
    this.table.set(entry);
    this.generation++;
    if (entry.endsAt < this.nextEndAt) this.nextEndAt = entry.endsAt;
    if (!quiet) this.report('applied', entry, local);
  }

  /** Drops `entry` if it is still the one held, and reports why, unless `quiet`. */
  protected drop(entry: OverrideEntry, action: 'removed' | 'expired', local: boolean, quiet = false): void {
    if (this.table.get(entry.policy, entry.pattern) !== entry) return;
    this.table.delete(entry.policy, entry.pattern);
    this.generation++;
    if (!quiet) this.report(action, entry, local);
  }

  private report(action: RateLimitOverrideEvent['action'], entry: OverrideEntry, local: boolean): void {
    const hook = this.events.hooks?.override;
    if (hook === undefined) return;
    try {
      hook({ action, local, ...entryOf(entry) });
    } catch {
      // The event bus logs its listeners' failures; a hook given by hand must not fail an override either.
    }
  }
}

/** What listOverrides and events report of an entry: the pattern as set, the override as set, its end. */
export function entryOf({ policy, tracker, override, until }: OverrideEntry): RateLimitOverrideEntry {
  return until === undefined ? { policy, tracker, override } : { policy, tracker, override, until };
}
