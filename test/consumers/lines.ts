/** One module resolution the shipped declarations are type-checked under, with skipLibCheck off. */
export interface TypeCheck {
  resolution: 'node10' | 'node16' | 'nodenext' | 'bundler';
  /** Check from an ES module (`types.mts`): how a Nest 12 app (ES modules only) meets node16 / nodenext. */
  esmFile?: boolean;
}

/** A user's app on one Nest line, set up as that line's own starter and docs set one up. */
export interface ConsumerLine {
  name: string;
  /** Version range of every @nestjs/* framework package. */
  nest: string;
  terminus: string;
  /** `@opentelemetry/api`, for the `nestjs-redis-ratelimit/opentelemetry` entry point. */
  opentelemetry: string;
  ioredis: string;
  reflectMetadata: string;
  typescript: string;
  /** `@types/express` of the Express major the line's platform-express brings. */
  typesExpress: string;
  /**
   * Strict mode, for the build and the declaration checks. Nest 10.0.0's own declarations fail under strict
   * null checks (its file validators), so that line compiles as the Nest 10 starter does, without strict.
   */
  strict: boolean;
  /** A `"type": "module"` app. */
  esm: boolean;
  /** Redis through a client the app created with its own ioredis, instead of a URL through forRootAsync. */
  passesOwnClient: boolean;
  compilerOptions: object;
  typeChecks: TypeCheck[];
  /**
   * Optional peers installed at these versions besides terminus and OpenTelemetry: the app wires in the
   * library's event-emitter and Prometheus modules (fixture/extras-peers.ts), and every boot reads what they counted.
   */
  optionalPeers?: { eventEmitter: string; promClient: string };
  /**
   * Runners that run README › "Testing your app" in this app (fixture/rate-limit.*.test.ts): jest with the
   * README's jest config, vitest as it comes.
   */
  testRunners?: Array<'jest' | 'vitest'>;
}

const CJS_NODE10 = { module: 'commonjs', moduleResolution: 'node', target: 'es2021' };
const CJS_NODENEXT = { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2023' };

export const CONSUMER_LINES: ConsumerLine[] = [
  {
    // The oldest release the peer range admits, with the oldest TypeScript and ioredis it admits.
    name: 'nest-10.0.0',
    nest: '10.0.0',
    terminus: '10.0.0',
    opentelemetry: '1.4.0',
    ioredis: '5.3.0',
    reflectMetadata: '^0.1.13',
    typescript: '5.0.4',
    strict: false,
    typesExpress: '^4.17.0',
    esm: false,
    passesOwnClient: true,
    compilerOptions: CJS_NODE10,
    typeChecks: [{ resolution: 'node10' }, { resolution: 'node16' }, { resolution: 'nodenext' }, { resolution: 'bundler' }],
    // The oldest majors the optional peer ranges admit (event-emitter 2.0.0 asks for Nest ^8 || ^9 || ^10).
    optionalPeers: { eventEmitter: '2.0.0', promClient: '14.0.0' },
  },
  {
    name: 'nest-10',
    nest: '^10.0.0',
    terminus: '^11.0.0',
    opentelemetry: '^1.9.0',
    ioredis: '^5.0.0',
    reflectMetadata: '^0.2.0',
    typescript: '~5.4.0',
    strict: true,
    typesExpress: '^4.17.0',
    esm: false,
    passesOwnClient: false,
    compilerOptions: CJS_NODE10,
    typeChecks: [{ resolution: 'node16' }, { resolution: 'nodenext' }, { resolution: 'bundler' }],
  },
  {
    name: 'nest-11',
    nest: '^11.0.0',
    terminus: '^11.0.0',
    opentelemetry: '^1.9.0',
    ioredis: '^5.0.0',
    reflectMetadata: '^0.2.0',
    typescript: '~5.9.0',
    strict: true,
    typesExpress: '^5.0.0',
    esm: false,
    passesOwnClient: true,
    compilerOptions: CJS_NODENEXT,
    typeChecks: [{ resolution: 'node16' }, { resolution: 'nodenext' }, { resolution: 'bundler' }],
  },
  {
    // The first Nest 12 release, pinned, with the first terminus 12. 12.0.1 came out before 12.0.0, and 12.0.0 is
    // no installable line: its @nestjs/core, platform-express and testing ask for Nest ^11 peers (plain npm install
    // stops with ERESOLVE), and platform-fastify has no 12.0.0.
    name: 'nest-12.0',
    nest: '12.0.1',
    terminus: '12.0.0',
    opentelemetry: '^1.9.0',
    ioredis: '^6.0.0',
    reflectMetadata: '^0.2.0',
    typescript: '~5.9.0',
    strict: true,
    typesExpress: '^5.0.0',
    esm: false,
    passesOwnClient: false,
    compilerOptions: CJS_NODENEXT,
    typeChecks: [{ resolution: 'node16', esmFile: true }, { resolution: 'nodenext' }, { resolution: 'bundler' }],
  },
  {
    // The latest Nest 12.
    name: 'nest-12',
    nest: '^12.0.0',
    terminus: '^12.0.0',
    opentelemetry: '^1.9.0',
    ioredis: '^6.0.0',
    reflectMetadata: '^0.2.0',
    typescript: '~6.0.0',
    strict: true,
    typesExpress: '^5.0.0',
    esm: true,
    passesOwnClient: true,
    compilerOptions: CJS_NODENEXT,
    typeChecks: [{ resolution: 'node16', esmFile: true }, { resolution: 'nodenext', esmFile: true }, { resolution: 'bundler' }],
    // An ES-module app is where jest needs the README's setup.
    testRunners: ['jest', 'vitest'],
  },
];
