import type { OverrideEntry } from './runtime-overrides';

/** The overrides of one policy name: exact trackers, prefixes grouped by length, and `*`. */
class PolicyOverrides {
  readonly exact = new Map<string, OverrideEntry>();
  /** Prefix (without its `*`) → entry, per prefix length. */
  readonly prefixes = new Map<number, Map<string, OverrideEntry>>();
  /** The distinct prefix lengths, longest first: one map lookup each. */
  lengths: number[] = [];
  star: OverrideEntry | undefined;
  size = 0;

  match(tracker: string): OverrideEntry | undefined {
    if (this.exact.size > 0) {
      const exact = this.exact.get(tracker);
      if (exact !== undefined) return exact;
    }
    const { lengths } = this;
    for (let i = 0; i < lengths.length; i++) {
      const length = lengths[i];
      if (length > tracker.length) continue;
      const entry = this.prefixes.get(length)!.get(tracker.slice(0, length));
      if (entry !== undefined) return entry;
    }
    return this.star;
  }

  get(pattern: string): OverrideEntry | undefined {
    if (pattern === '*') return this.star;
    if (!pattern.endsWith('*')) return this.exact.get(pattern);
    return this.prefixes.get(pattern.length - 1)?.get(pattern.slice(0, -1));
  }

  set(entry: OverrideEntry): void {
    const { pattern } = entry;
    if (this.get(pattern) === undefined) this.size++;
    if (pattern === '*') this.star = entry;
    else if (!pattern.endsWith('*')) this.exact.set(pattern, entry);
    else {
      const length = pattern.length - 1;
      let group = this.prefixes.get(length);
      if (group === undefined) {
        this.prefixes.set(length, (group = new Map()));
        this.lengths = [...this.prefixes.keys()].sort((a, b) => b - a);
      }
      group.set(pattern.slice(0, -1), entry);
    }
  }

  delete(pattern: string): void {
    if (this.get(pattern) === undefined) return;
    this.size--;
    if (pattern === '*') this.star = undefined;
    else if (!pattern.endsWith('*')) this.exact.delete(pattern);
    else {
      const length = pattern.length - 1;
      const group = this.prefixes.get(length)!;
      group.delete(pattern.slice(0, -1));
      if (group.size === 0) {
        this.prefixes.delete(length);
        this.lengths = this.lengths.filter((l) => l !== length);
      }
    }
  }

  *entries(): Generator<OverrideEntry> {
    yield* this.exact.values();
    for (const group of this.prefixes.values()) yield* group.values();
    if (this.star) yield this.star;
  }
}

/**
 * The runtime overrides an instance applies, for the request path: per policy name, an exact map, the
 * prefixes grouped by length, and `*`. The most specific wins: the exact tracker, then the longest prefix,
 * then `*`. A decision whose policy has no override costs one map miss, and none at all while no override
 * exists ({@link size} 0); one that has costs one lookup per distinct prefix length at most.
 */
export class OverrideTable {
  private readonly byPolicy = new Map<string, PolicyOverrides>();
  private count = 0;

  /** Overrides held. */
  get size(): number {
    return this.count;
  }

  /** Whether policy `name` has any override. */
  has(name: string): boolean {
    return this.byPolicy.has(name);
  }

  /** The override of policy `name` for `tracker` (`by:acme`, `ip:…`), the most specific one; `undefined` when none. */
  match(name: string, tracker: string): OverrideEntry | undefined {
    return this.byPolicy.get(name)?.match(tracker);
  }

  /** The override of policy `name` set for exactly `pattern`. */
  get(name: string, pattern: string): OverrideEntry | undefined {
    return this.byPolicy.get(name)?.get(pattern);
  }

  /** Holds `entry`, replacing the one of its policy set for the same pattern. */
  set(entry: OverrideEntry): void {
    let overrides = this.byPolicy.get(entry.policy);
    if (overrides === undefined) this.byPolicy.set(entry.policy, (overrides = new PolicyOverrides()));
    this.count -= overrides.size;
    overrides.set(entry);
    this.count += overrides.size;
  }

  /** Drops the override of policy `name` set for exactly `pattern`, if any. */
  delete(name: string, pattern: string): void {
    const overrides = this.byPolicy.get(name);
    if (overrides === undefined) return;
    this.count -= overrides.size;
    overrides.delete(pattern);
    this.count += overrides.size;
    if (overrides.size === 0) this.byPolicy.delete(name);
  }

  /** Every override held, policy by policy. */
  *entries(): Generator<OverrideEntry> {
    for (const overrides of this.byPolicy.values()) yield* overrides.entries();
  }
}
