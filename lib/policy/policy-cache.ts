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
  private readonly byIdentity = new WeakMap<RateLimitPolicy, CompiledPolicy>();
  private readonly byContent = new LruMap<CompiledPolicy>();
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
    if (known !== undefined && (known.policy === policy || sameFields(policy, known.policy))) return known;
    const key = contentKey(policy);
    if (key === undefined) return this.byObject(policy);
    let compiled = this.byContent.get(key, true);
    if (compiled === undefined) {
      compiled = this.compile(contentCopy(policy));
      if (this.byContent.size >= this.maxContentEntries) this.byContent.delete(this.byContent.oldest()!);
      this.byContent.set(key, compiled);
    }
    this.byIdentity.set(policy, compiled);
    return compiled;
  }

  private byObject(policy: RateLimitPolicy): CompiledPolicy {
    let compiled = this.byIdentity.get(policy);
    if (compiled === undefined || compiled.policy !== policy) {
      compiled = this.compile(policy);
      this.byIdentity.set(policy, compiled);
    }
    return compiled;
  }
}

/** Whether `policy` has exactly the own enumerable fields and values of `copy` (a content-compiled policy's frozen copy). */
function sameFields(policy: RateLimitPolicy, copy: RateLimitPolicy): boolean {
  const a = policy as unknown as Record<string, unknown>;
  const b = copy as unknown as Record<string, unknown>;
  let fields = 0;
  for (const field in a) {
    if (!Object.prototype.hasOwnProperty.call(a, field) || a[field] !== b[field] || Object.is(a[field], -0)) return false;
    fields++;
  }
  for (const field in b) if (Object.prototype.hasOwnProperty.call(b, field)) fields--;
  return fields === 0;
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
