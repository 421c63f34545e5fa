import type { RateLimitPolicy } from '../interfaces/policy.interface';
import type { CompiledPolicy } from './compile-policy';
import { LruMap } from '../shared/lru-map';

/**
 * Longest content key kept, in UTF-16 code units. A valid policy's key is far shorter (names and scopes are
 * at most 64 characters); a longer one belongs to a policy that fails to compile, or to a window written
 * with hundreds of digits, and is compiled on every call instead of being held.
 */
const MAX_CONTENT_KEY_LENGTH = 512;

/** Options of a {@link PolicyCache}. */
export interface PolicyCacheOptions {
  /** Most policies remembered by content; the least recently used is forgotten first. @default 1000 */
  maxContentEntries?: number;
}

/**
 * Compiled policies, found by content as well as by identity, so a policy written inline at the call
 * (`limiter.consume({ algorithm: 'gcra', limit: 10, window: '1s' }, id)`, a new object each time) is
 * compiled once, not on every call.
 *
 * A plain object whose fields are all strings, numbers or booleans is found by a string of those fields
 * ({@link contentKey}) and compiled from a frozen copy of them: what it decides cannot change when the
 * caller later mutates its object, and two objects with equal fields share one compiled policy. A policy
 * with a function (`limit`, `window`, `cost`, `by`, `skipIf`, …) or an object (a calendar `window`,
 * `escalate`) is found by identity only (a `WeakMap`, so it goes when the caller drops it). Bounded: at
 * most `maxContentEntries` content keys of at most 512 characters.
 *
 * @example
 * const policies = new PolicyCache((policy) => compilePolicy(policy, registry, 'RateLimiterService', 'svc'));
 * policies.get({ algorithm: 'gcra', limit: 10, window: '1s' }) === policies.get({ algorithm: 'gcra', limit: 10, window: '1s' }); // true
 */
export class PolicyCache {
  private readonly byIdentity = new WeakMap<RateLimitPolicy, KnownPolicy>();
  private readonly byContent = new LruMap<KnownPolicy>();
  private readonly maxContentEntries: number;

  /** `compile` validates a policy and throws on a bad one; only what compiles is remembered. */
  constructor(
    private readonly compile: (policy: RateLimitPolicy) => CompiledPolicy,
    options: PolicyCacheOptions = {},
  ) {
    this.maxContentEntries = options.maxContentEntries ?? 1_000;
  }

  /** The compiled form of `policy`, compiled now if neither its content nor its identity is known. */
  get(policy: RateLimitPolicy): CompiledPolicy {
    // A reused object whose fields are still those it was compiled from: no content key to build.
    const known = this.byIdentity.get(policy);
    if (known !== undefined && (known.compiled.policy === policy || sameFields(policy, known.fields))) return known.compiled;
    const key = contentKey(policy);
    if (key === undefined) return this.byObject(policy);
    let byContent = this.byContent.get(key, true);
    if (byContent === undefined) {
      const copy = contentCopy(policy);
      byContent = { compiled: this.compile(copy), fields: fieldsOf(copy) };
      if (this.byContent.size >= this.maxContentEntries) this.byContent.delete(this.byContent.oldest()!);
      this.byContent.set(key, byContent);
    }
    this.byIdentity.set(policy, byContent);
    return byContent.compiled;
  }

  private byObject(policy: RateLimitPolicy): CompiledPolicy {
    let known = this.byIdentity.get(policy);
    if (known === undefined || known.compiled.policy !== policy) {
      known = { compiled: this.compile(policy), fields: IDENTITY_ONLY };
      this.byIdentity.set(policy, known);
    }
    return known.compiled;
  }
}

/**
 * A compiled policy, and the fields of the object it was compiled from as `[name, value, name, value, …]` in
 * their order (a content-compiled policy's frozen copy; none for a policy compiled by identity).
 */
interface KnownPolicy {
  compiled: CompiledPolicy;
  fields: readonly unknown[];
}

/** The fields of a policy compiled by identity: no object's fields are these (a field's name is never a symbol). */
const IDENTITY_ONLY: readonly unknown[] = [Symbol('compiled by identity')];

/**
 * Whether `policy` has exactly the own enumerable `fields` (see {@link KnownPolicy}), in the same order, with
 * the same values. Stricter than equal content (another order, or an inherited enumerable field, answers
 * false, and the caller then looks the policy up by content), and one pass over the object: it runs on every
 * decision whose caller reuses a policy object, to see that object changed since.
 */
function sameFields(policy: RateLimitPolicy, fields: readonly unknown[]): boolean {
  const a = policy as unknown as Record<string, unknown>;
  let i = 0;
  for (const field in a) {
    const value = a[field];
    // -0 === 0, but a copy never holds -0 (contentKey refuses it).
    if (field !== fields[i] || value !== fields[i + 1] || (value === 0 && 1 / value < 0)) return false;
    i += 2;
  }
  return i === fields.length;
}

/** The fields of a content copy as {@link KnownPolicy} keeps them. */
function fieldsOf(copy: RateLimitPolicy): unknown[] {
  const fields: unknown[] = [];
  for (const [name, value] of Object.entries(copy)) fields.push(name, value);
  return fields;
}

/**
 * A string that is equal for two plain objects exactly when they have the same own enumerable fields (what
 * `{ ...policy }` copies, and all a copy is compiled from), written in the same order, with the same values (each field name and string carries its length, each value its type, so no
 * two different policies meet); `undefined` when the policy is not a plain object, or has a field whose value
 * is not a string, number, boolean or `undefined` (a function, an object such as a calendar window, `null`,
 * `-0`), or would make a key longer than 512 characters. Unknown fields are part of the key, so a policy
 * with one is compiled (and rejected) like any other. The order matters only for speed: the same literal
 * always lists its fields in the same order, and the same fields in another order make a second entry.
 */
export function contentKey(policy: RateLimitPolicy): string | undefined {
  if (policy === null || typeof policy !== 'object') return undefined;
  const proto: unknown = Object.getPrototypeOf(policy);
  if (proto !== Object.prototype && proto !== null) return undefined;
  const fields = policy as unknown as Record<string, unknown>;
  let key = '';
  for (const field in fields) {
    if (!Object.prototype.hasOwnProperty.call(fields, field)) return undefined;
    const value = fields[field];
    key += `${field.length}:${field}`;
    switch (typeof value) {
      case 'string':
        key += `s${value.length}:${value}`;
        break;
      case 'number':
        if (Object.is(value, -0)) return undefined;
        key += `n${value};`;
        break;
      case 'boolean':
        key += value ? 't' : 'f';
        break;
      case 'undefined':
        key += 'u';
        break;
      default:
        return undefined;
    }
    if (key.length > MAX_CONTENT_KEY_LENGTH) return undefined;
  }
  return key;
}

/** A frozen copy of a content-keyed policy (strings, numbers and booleans only: nothing to copy deeper). */
function contentCopy(policy: RateLimitPolicy): RateLimitPolicy {
  return Object.freeze({ ...policy });
}
