import { RateLimitConfigError } from '../../../errors/rate-limit-config.error';

/** A client library a transport takes a class from (ioredis's `Command`, GLIDE's `Script`). */
export interface ClientPackage {
  /** The package, as `require` names it: `ioredis`, `@valkey/valkey-glide`. */
  readonly name: string;
  /** The library, as messages name it. */
  readonly label: string;
  /** Exports of the package's entry point a client is an instance of (or of a subclass of). */
  readonly clientClasses: readonly string[];
  /** The export the transport needs. */
  readonly member: string;
}

/**
 * The entry point of the copy of `pkg` that `client` was created from, to take `pkg.member` from it. An app can
 * have two copies installed (two versions, or one nested under another package): the client is then an instance
 * of the other copy's classes, and a class of ours does not work with it (GLIDE keeps each `Script`'s code in the
 * native state of the copy that created it, so the client's copy never finds it on `NOSCRIPT`). So: the copy this
 * library resolves when the client is one of its own (the usual case, nothing searched), else the loaded module
 * that exports the client's class. When neither is it (a bundle that hides its modules), a
 * {@link RateLimitConfigError} at bootstrap says that two copies are installed and how to keep one.
 */
export function clientModule<T extends object>(client: object, pkg: ClientPackage): T {
  const made = (exports: unknown): exports is T =>
    readable(exports) && typeof exports[pkg.member] === 'function' && pkg.clientClasses.some((name) => isInstance(client, exports[name]));
  const ours = loadOwn(pkg.name);
  if (!(ours instanceof Error) && made(ours)) return ours;
  for (const key of Object.keys(require.cache)) {
    try {
      const exports = require.cache[key]?.exports as unknown;
      if (made(exports)) return exports;
    } catch {
      // A module whose exports throw when read is not the client's library.
    }
  }
  throw notFound(pkg, ours);
}

/**
 * Whether `client` is an instance of `type` (or of a subclass), by its prototype chain: not by the `constructor`
 * of its prototypes, which ioredis overwrites when it mixes EventEmitter into its classes.
 */
function isInstance(client: object, type: unknown): boolean {
  const prototype = typeof type === 'function' ? (type as { prototype?: unknown }).prototype : undefined;
  return typeof prototype === 'object' && prototype !== null && Object.prototype.isPrototypeOf.call(prototype, client);
}

function readable(exports: unknown): exports is Record<string, unknown> {
  return (typeof exports === 'object' && exports !== null) || typeof exports === 'function';
}

/** The copy of `name` this library resolves, or why there is none. */
function loadOwn(name: string): unknown {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- an optional peer, loaded only for its client
    return require(name) as unknown;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

function notFound({ name, label }: ClientPackage, ours: unknown): RateLimitConfigError {
  const where = (() => {
    try {
      return require.resolve(name);
    } catch {
      return undefined;
    }
  })();
  if (ours instanceof Error || where === undefined) {
    return new RateLimitConfigError(
      `redis: the ${label} client passed in comes from a copy of ${name} that is not among the loaded modules, and this library cannot load ${name} itself (${ours instanceof Error ? ours.message : 'not found'}); install ${name} where nestjs-redis-ratelimit resolves it (a single copy, the app's).`,
    );
  }
  return new RateLimitConfigError(
    `redis: the ${label} client passed in comes from another copy of ${name} than the one this library loads (${where}), and that copy is not among the loaded modules, so its classes cannot be used: two copies of ${name} are installed. ` +
      `Keep one: \`npm ls ${name}\` lists them; \`npm dedupe\`, or one version pinned in package.json "overrides" (yarn/pnpm: "resolutions" / "pnpm.overrides"), merges them.`,
  );
}
