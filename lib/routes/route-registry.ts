import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { PATH_METADATA } from '@nestjs/common/constants';
import { DiscoveryService, MetadataScanner, Reflector } from '@nestjs/core';
import { RateLimitAlgorithmRegistry } from '../algorithms/algorithm.registry';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import type { RateLimitPolicy } from '../interfaces/policy.interface';
import { RateLimitPolicies, RateLimitSkip, type RateLimitMetadata } from '../rate-limit.decorator';
import { RATE_LIMIT_OPTIONS } from '../rate-limit.module-definition';
import { hasOverride, policyWhere, resolvePolicies, type DeclaredPolicy, type InheritedPolicies } from '../policy/policy-overrides';
import type { CompiledPolicy } from '../policy/compile-policy';
import { RateLimitAdaptiveLimits } from '../overload/adaptive-limits';
import { buildRoutePlan, type PlanSource, type RoutePlan } from './route-plan';

// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
type Handler = Function;
type ControllerClass = abstract new (...args: never[]) => unknown;
/** What discovery lists: a class (or factory) and, once created, its instance. */
type InstanceWrapper = ReturnType<DiscoveryService['getProviders']>[number];

const DEFAULT_POLICY = 'RateLimitModule options: defaultPolicy';

/**
 * Resolves and caches each handler's {@link RoutePlan}: `@SkipRateLimit` / `@RateLimit` on the handler, then
 * on the class, then the module's `defaultPolicy`. Every controller is planned at bootstrap, so a bad policy
 * fails `app.init()` with a message naming the controller, the handler and the field; the request path only
 * looks the plan up.
 *
 * A route's counters are keyed `r=<controller>.<method>`: the controller's scope name (its class name, made
 * unique among controllers) and the property key the handler sits under on the prototype or on the
 * controller's instance (where a constructor may set a wrapped or bound handler), which is unique per class.
 * Never the function's `.name`: a wrapping method decorator gives every handler the wrapper's name, and an
 * anonymous handler has none. Characters other than `A-Z a-z 0-9 _ $` are percent-encoded, so `.` only ever
 * separates and the key is unique by construction; the same code gives the same keys on every boot.
 */
@Injectable()
export class RateLimitRouteRegistry implements OnModuleInit {
  /** Each class's plans by handler, or by `~<name>` for handlers found under no property key (see {@link plan}). */
  private readonly plans = new WeakMap<ControllerClass, Map<Handler | string, RoutePlan | null>>();
  /** Scope names given out, so two controllers with the same class name never share counters. */
  private readonly scopeNames = new Map<ControllerClass, string>();
  private readonly takenNames = new Set<string>();
  /** Each controller's handlers by function, with the property key each sits under (the first, for an alias). */
  private readonly methodKeys = new WeakMap<ControllerClass, Map<Handler, string>>();
  private readonly defaultPolicies: RateLimitPolicy[] | undefined;
  /** `defaultPolicies` as what a route inherits, for `@RateLimit` overrides. */
  private readonly defaults: InheritedPolicies | undefined;
  /** Every policy planned (the module's defaults, every route's), by name: the names runtime overrides may use. */
  private readonly named = new Map<string, Set<CompiledPolicy>>();

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly reflector: Reflector,
    private readonly algorithms: RateLimitAlgorithmRegistry,
    @Inject(RATE_LIMIT_OPTIONS) options: RateLimitModuleOptions,
    private readonly adaptiveLimits: RateLimitAdaptiveLimits,
  ) {
    const { defaultPolicy } = options;
    this.defaultPolicies = defaultPolicy === undefined ? undefined : ([] as RateLimitPolicy[]).concat(defaultPolicy);
    if (this.defaultPolicies) {
      const policies = this.defaultPolicies;
      this.learn(buildRoutePlan({ policies, where: DEFAULT_POLICY, route: '', scopeKey: 'default' }, algorithms));
      this.defaults = {
        origin: DEFAULT_POLICY,
        policies: policies.map((policy, i) => ({ policy, where: policyWhere(DEFAULT_POLICY, i, policies.length) })),
      };
    }
  }

  /**
   * Plans every handler of every controller, and every `@RateLimit` of a provider (GraphQL resolvers,
   * WebSocket gateways); throws on the first invalid policy.
   */
  onModuleInit(): void {
    for (const wrapper of [...this.discovery.getControllers(), ...this.discovery.getProviders()]) this.learnInstanceHandlers(wrapper);
    for (const [controller, handler] of this.controllerRoutes()) this.plan(controller, handler);
    for (const { metatype, inject } of this.discovery.getProviders()) {
      // `inject` marks a factory provider, whose metatype is the factory function rather than a class.
      if (typeof metatype !== 'function' || inject) continue;
      const limitedClass = this.reflector.get<RateLimitMetadata | undefined>(RateLimitPolicies.KEY, metatype) !== undefined;
      for (const handler of methodsOf(metatype as ControllerClass, this.scanner)) {
        if (limitedClass || this.reflector.get<RateLimitMetadata | undefined>(RateLimitPolicies.KEY, handler) !== undefined) {
          this.plan(metatype as ControllerClass, handler);
        }
      }
    }
  }

  /**
   * The handlers of HTTP routes that act once their handler has settled (`concurrency` leases, `settle`),
   * planned before `onModuleInit` (for RateLimitLeaseRoutes, which must act before Nest builds its routes) in
   * the order it plans them, so scope names are the same. A policy that does not compile is left for
   * `onModuleInit` to report.
   */
  httpRoutesAwaitingHandlers(): Handler[] {
    const found: Handler[] = [];
    for (const [controller, handler] of this.controllerRoutes()) {
      try {
        if (Reflect.hasMetadata(PATH_METADATA, handler) && this.plan(controller, handler)?.awaitsHandler) found.push(handler);
      } catch {
        // onModuleInit throws it again, naming the route and the field.
      }
    }
    return found;
  }

  /** Every controller's routes (handlers with a path or their own `@RateLimit`), in discovery order. */
  private *controllerRoutes(): Generator<[ControllerClass, Handler]> {
    for (const { metatype } of this.discovery.getControllers()) {
      if (typeof metatype !== 'function') continue;
      for (const handler of methodsOf(metatype as ControllerClass, this.scanner)) {
        if (this.isRoute(handler)) yield [metatype as ControllerClass, handler];
      }
    }
  }

  /**
   * The plan of `handler` on `controller`; `null` when the route is not limited. A handler found under no
   * property key is one a request-scoped instance set on itself (bound or wrapped in its constructor): a new
   * function per request, so it is planned once per name and never kept itself.
   */
  plan(controller: ControllerClass, handler: Handler): RoutePlan | null {
    let byHandler = this.plans.get(controller);
    if (!byHandler) {
      byHandler = new Map();
      this.plans.set(controller, byHandler);
    }
    let plan = byHandler.get(handler);
    if (plan === undefined) {
      const method = this.methodKey(controller, handler);
      const byName = method === undefined ? `~${handler.name}` : undefined;
      plan = byName === undefined ? undefined : byHandler.get(byName);
      if (plan === undefined) {
        const source = this.source(controller, handler, method);
        plan = source && this.listAdaptive(this.learn(buildRoutePlan(source, this.algorithms)));
        // Every policy skipped by name (@SkipRateLimit('a', 'b')): the route is not limited.
        if (plan && plan.policies.length === 0 && plan.adaptive === undefined) plan = null;
      }
      byHandler.set(byName ?? handler, plan);
    }
    return plan;
  }

  /** Every policy named `name` that the module's defaults or a route planned so far enforce (all are, after bootstrap). */
  policiesNamed(name: string): CompiledPolicy[] {
    return [...(this.named.get(name) ?? [])];
  }

  /** The names of every policy planned so far. */
  policyNames(): string[] {
    return [...this.named.keys()];
  }

  private learn(plan: RoutePlan): RoutePlan {
    for (const { compiled } of plan.policies) {
      let policies = this.named.get(compiled.name);
      if (policies === undefined) this.named.set(compiled.name, (policies = new Set()));
      policies.add(compiled);
    }
    return plan;
  }

  /** Lists the adaptive limits of a route's `plan` (one per route and policy), for the metrics' gauges. */
  private listAdaptive(plan: RoutePlan): RoutePlan {
    for (const { compiled, limiter } of plan.adaptive ?? []) this.adaptiveLimits.add({ policy: compiled.name, route: plan.route, limiter });
    return plan;
  }

  private isRoute(handler: Handler): boolean {
    return (
      Reflect.hasMetadata(PATH_METADATA, handler) ||
      this.reflector.get<RateLimitMetadata | undefined>(RateLimitPolicies.KEY, handler) !== undefined
    );
  }

  /** Where `handler`'s policies come from; `method` is its property key (see {@link methodKey}). */
  private source(controller: ControllerClass, handler: Handler, method: string | undefined): PlanSource | null {
    const route = `${controller.name}.${method ?? handler.name}`;
    // `~` (which keyPart never writes) keeps the keys of handlers found by name apart from all the others.
    const scopeKey = `r=${this.scopeName(controller)}.${method === undefined ? `~${keyPart(handler.name)}` : keyPart(method)}`;
    // A handler an instance set on itself (a bound method) stands for the prototype's, which carries the decorators.
    const decorated = method === undefined ? handler : ((controller.prototype as Record<string, Handler>)[method] ?? handler);
    const handlerSkip = this.reflector.get<true | readonly string[] | undefined>(RateLimitSkip.KEY, decorated);
    if (handlerSkip === true) return null;
    const classSkip = this.reflector.get<true | readonly string[] | undefined>(RateLimitSkip.KEY, controller);
    const skip = { onHandler: handlerSkip ?? [], onClass: classSkip === true ? [] : (classSkip ?? []) };
    const own = this.reflector.get<RateLimitMetadata | undefined>(RateLimitPolicies.KEY, decorated);
    const onClass = this.reflector.get<RateLimitMetadata | undefined>(RateLimitPolicies.KEY, controller);
    const classWhere = `@RateLimit on ${controller.name} (applied to ${route})`;
    if (own) {
      // Overrides on the handler change what the class gives the route, or else the module's defaults.
      const inherited = (): InheritedPolicies | undefined =>
        onClass && Array.isArray(onClass.policies)
          ? { origin: `@RateLimit on ${controller.name}`, policies: resolvePolicies(declaredOf(onClass), classWhere, this.defaults) }
          : this.defaults;
      return { ...this.declared(own, `@RateLimit on ${route}`, inherited), route, scopeKey, skip };
    }
    if (classSkip === true) return null;
    if (onClass) return { ...this.declared(onClass, classWhere, () => this.defaults), route, scopeKey, skip };
    if (this.defaultPolicies)
      return {
        policies: this.defaultPolicies,
        where: `RateLimitModule options: defaultPolicy (applied to ${route})`,
        route,
        scopeKey,
        skip,
      };
    return null;
  }

  /**
   * The policies a decorator declares, at `where`: as written, or, when some are overrides, merged into what
   * the route inherits (asked only then).
   */
  private declared(
    { policies }: RateLimitMetadata,
    where: string,
    inherited: () => InheritedPolicies | undefined,
  ): Pick<PlanSource, 'policies' | 'where' | 'wheres'> {
    if (!hasOverride(policies)) return { policies: policies as RateLimitPolicy[], where };
    const resolved = resolvePolicies(declaredOf({ policies }), where, inherited());
    return { policies: resolved.map((p) => p.policy), where, wheres: resolved.map((p) => p.where) };
  }

  /**
   * The property key `handler` sits under on `controller`'s prototype (own or inherited: where the scanner, and
   * Nest's router, found it) or on its single instance ({@link learnInstanceHandlers}); `undefined` for a
   * handler found nowhere there (a function a request-scoped instance set on itself), which is then keyed by
   * its `.name`.
   */
  private methodKey(controller: ControllerClass, handler: Handler): string | undefined {
    return this.methodKeysOf(controller).get(handler);
  }

  private methodKeysOf(controller: ControllerClass): Map<Handler, string> {
    let keys = this.methodKeys.get(controller);
    if (!keys) {
      keys = new Map();
      const prototype = controller.prototype as Record<string, unknown> | undefined;
      for (const name of prototype ? this.scanner.getAllMethodNames(prototype) : []) {
        const method = prototype![name];
        if (typeof method === 'function' && !keys.has(method)) keys.set(method, name);
      }
      this.methodKeys.set(controller, keys);
    }
    return keys;
  }

  /**
   * Nest calls a route's handler as `instance[method]`, so a function a constructor sets there (bound, or
   * wrapped by a tracing library) is the handler the guard sees: it gets the property key it sits under, and
   * with it the route's own counter. Only a single (static) instance is known here; a request-scoped class
   * has one per request.
   */
  private learnInstanceHandlers(wrapper: InstanceWrapper): void {
    const { metatype, instance, inject } = wrapper;
    if (typeof metatype !== 'function' || inject || typeof instance !== 'object' || instance === null) return;
    if (!wrapper.isDependencyTreeStatic()) return;
    const prototype = metatype.prototype as Record<string, unknown> | undefined;
    if (!prototype) return;
    const keys = this.methodKeysOf(metatype as ControllerClass);
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      // Own data properties only: reading them runs no getter of the app's.
      const own: unknown = Object.getOwnPropertyDescriptor(instance, name)?.value;
      if (typeof own === 'function' && !keys.has(own)) keys.set(own, name);
    }
  }

  private scopeName(controller: ControllerClass): string {
    let name = this.scopeNames.get(controller);
    if (name === undefined) {
      const base = keyPart(controller.name);
      name = base;
      for (let n = 2; this.takenNames.has(name); n++) name = `${base}~${n}`;
      this.takenNames.add(name);
      this.scopeNames.set(controller, name);
    }
    return name;
  }
}

/**
 * The policies a decorator declares, for merging with what a route inherits. Adaptive policies ride along
 * as complete policies of their name (they have no window, and overrides treat them as complete); the route
 * plan takes them apart from the store's.
 */
function declaredOf({ policies }: RateLimitMetadata): DeclaredPolicy[] {
  return policies as DeclaredPolicy[];
}

/**
 * A class or method name as a key part: `A-Z a-z 0-9 _ $` as they are, any other character percent-encoded
 * (UTF-8; a lone surrogate as `%uXXXX`), so the result never holds `.`, `~`, `:` or braces and two names never
 * encode alike.
 */
function keyPart(name: string): string {
  return /^[A-Za-z0-9_$]*$/.test(name) ? name : name.replace(/[^A-Za-z0-9_$]/gu, encodeChar);
}

function encodeChar(c: string): string {
  const code = c.charCodeAt(0);
  if (c.length === 1 && code >= 0xd800 && code <= 0xdfff) return `%u${code.toString(16).toUpperCase()}`;
  return encodeURIComponent(c).replace(/[-.!'()*~]/g, (m) => `%${m.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The methods of `metatype`'s prototype, own and inherited, as Nest's scanner lists them. */
function methodsOf(metatype: ControllerClass, scanner: MetadataScanner): Handler[] {
  const prototype = metatype.prototype as Record<string, unknown> | undefined;
  if (!prototype) return [];
  return scanner
    .getAllMethodNames(prototype)
    .flatMap((name) => (typeof prototype[name] === 'function' ? [prototype[name] as Handler] : []));
}
