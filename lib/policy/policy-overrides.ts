import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitPolicy, RateLimitPolicyOverride } from '../interfaces/policy.interface';
import { describeValue } from '../shared/describe-value';

/** A policy as `@RateLimit` or `defaultPolicy` states it: complete, or an override of an inherited one. */
export type DeclaredPolicy = RateLimitPolicy | RateLimitPolicyOverride;

/** A route's policy with where it was declared, for error messages. */
export interface SourcedPolicy {
  readonly policy: RateLimitPolicy;
  readonly where: string;
}

/** The policies a route inherits (its class's `@RateLimit`, or the module's `defaultPolicy`). */
export interface InheritedPolicies {
  /** Where they are declared, e.g. `RateLimitModule options: defaultPolicy`. */
  readonly origin: string;
  readonly policies: readonly SourcedPolicy[];
}

/** The fields a complete policy has; lacking any of them makes a policy an override. */
const COMPLETE_FIELDS = ['algorithm', 'limit', 'window'] as const;

/** `where` of policy `index` in a list of `count` (`…, policy 2 of 3`), or `where` itself for a single policy. */
export function policyWhere(where: string, index: number, count: number): string {
  return count > 1 ? `${where}, policy ${index + 1} of ${count}` : where;
}

/** Whether `declared` (as a decorator stored it) holds an override of an inherited policy. */
export function hasOverride(declared: unknown): declared is DeclaredPolicy[] {
  return Array.isArray(declared) && declared.some((policy) => missingFields(policy).length > 0);
}

/**
 * The route's policies from `declared`, stated at `where`. Without an override, the list itself. With one,
 * the `inherited` policies, each override merged into the inherited policy of its name (only the fields it
 * sets change, so fields policies gain later are carried over too), each complete policy
 * replacing the inherited one of its name or, when none has it, added after them; an override that names no
 * inherited policy is a {@link RateLimitConfigError} naming the route, the name and the inherited names.
 */
export function resolvePolicies(
  declared: readonly DeclaredPolicy[],
  where: string,
  inherited: InheritedPolicies | undefined,
): SourcedPolicy[] {
  const count = declared.length;
  if (!hasOverride(declared))
    return declared.map((policy, i) => ({ policy: policy as RateLimitPolicy, where: policyWhere(where, i, count) }));
  assertDistinctNames(declared, where);
  const resolved = [...(inherited?.policies ?? [])];
  declared.forEach((policy, i) => {
    const at = policyWhere(where, i, count);
    const missing = missingFields(policy);
    // `?.`: a non-object is passed on as a complete policy, for compilePolicy to report.
    const name = policy?.name ?? 'default';
    const index = resolved.findIndex((p) => (p.policy?.name ?? 'default') === name);
    if (missing.length === 0) {
      const own = { policy: policy as RateLimitPolicy, where: at };
      if (index === -1) resolved.push(own);
      else resolved[index] = own;
      return;
    }
    if (policy.name === undefined) {
      throw new RateLimitConfigError(
        `${at}: a policy without ${list(missing, 'or')} overrides the inherited policy of its name, and this one has no name; add name: '<the policy to change>', or set ${list(missing, 'and')} for a policy of its own.`,
      );
    }
    if (index === -1) throw new RateLimitConfigError(`${at}: ${noSuchPolicy(name, missing, inherited)}`);
    resolved[index] = { policy: merge(resolved[index].policy, policy), where: `${at} over ${resolved[index].where}` };
  });
  return resolved;
}

/** `base` with every field `override` sets (a field set to `undefined` keeps the base's value). */
function merge(base: RateLimitPolicy, override: Partial<RateLimitPolicy>): RateLimitPolicy {
  const merged: Record<string, unknown> = { ...base };
  for (const [field, value] of Object.entries(override)) if (value !== undefined) merged[field] = value;
  return merged as unknown as RateLimitPolicy;
}

/** Which of `algorithm`, `limit` and `window` `policy` lacks; none for a non-object, which compilePolicy reports. */
function missingFields(policy: unknown): string[] {
  if (policy === null || typeof policy !== 'object') return [];
  // An adaptive policy has no window: with its algorithm and limit, it is complete.
  if ((policy as { algorithm?: unknown }).algorithm === 'adaptive' && (policy as { limit?: unknown }).limit !== undefined) return [];
  return COMPLETE_FIELDS.filter((field) => (policy as Record<string, unknown>)[field] === undefined);
}

function noSuchPolicy(name: string, missing: string[], inherited: InheritedPolicies | undefined): string {
  const known = inherited?.policies.map(({ policy }) => `'${policy.name ?? 'default'}'`) ?? [];
  const why = `name: ${describeValue(name)} sets no ${list(missing, 'or')}, so it overrides the inherited policy of that name, but`;
  const own = 'set algorithm, limit and window for a policy of its own';
  if (known.length === 0) return `${why} the route inherits no policy (RateLimitModule options have no defaultPolicy); ${own}.`;
  return `${why} the route inherits none of that name (${inherited!.origin} has ${known.join(', ')}); name one of those, or ${own}.`;
}

function assertDistinctNames(declared: readonly DeclaredPolicy[], where: string): void {
  const seen = new Set<string>();
  for (const policy of declared) {
    const name = policy?.name ?? 'default';
    if (seen.has(name)) {
      throw new RateLimitConfigError(`${where}: name: two policies are named '${name}'; give each policy of a route its own name.`);
    }
    seen.add(name);
  }
}

function list(fields: string[], conjunction: 'and' | 'or'): string {
  return fields.length === 1 ? fields[0] : `${fields.slice(0, -1).join(', ')} ${conjunction} ${fields[fields.length - 1]}`;
}
