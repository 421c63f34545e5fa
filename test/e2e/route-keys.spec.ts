/**
 * A route's counter is keyed by its controller and the property key of its handler on the prototype (the
 * name Nest found it under), never by the function's `.name`: handlers wrapped by one method decorator
 * (tracing, logging) all carry the wrapper's name, and handlers assigned as anonymous functions carry none,
 * yet each route keeps its own counter. Ordinary routes keep their `r=<Controller>.<method>` keys.
 */
import { Controller, Get, Scope, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { RateLimit, RateLimitModule } from '../../lib';
import { bootApp, MATRIX, SharedRedis, storeOptions } from './harness';

// A sliding log, not a fixed window: two requests a few ms apart must never straddle a window boundary.
const ONE_PER_MINUTE = { algorithm: 'sliding-log', limit: 1, window: '1m' } as const;

/**
 * A tracing-style decorator: replaces the method with a wrapper and copies its metadata, as such decorators
 * do so that Nest still sees the route. Every wrapper is named `traced`.
 */
function Traced(): MethodDecorator {
  return (_target, _key, descriptor: PropertyDescriptor) => {
    const original = descriptor.value as (...args: unknown[]) => unknown;
    const traced = function (this: unknown, ...args: unknown[]) {
      return original.apply(this, args);
    };
    for (const key of Reflect.getMetadataKeys(original)) Reflect.defineMetadata(key, Reflect.getMetadata(key, original), traced);
    descriptor.value = traced;
    return descriptor;
  };
}

@Controller('traced')
class TracedController {
  @Traced()
  @Get('first')
  @RateLimit(ONE_PER_MINUTE)
  first() {
    return 'first';
  }

  @Traced()
  @Get('second')
  @RateLimit(ONE_PER_MINUTE)
  second() {
    return 'second';
  }

  @Get('plain')
  @RateLimit(ONE_PER_MINUTE)
  plain() {
    return 'plain';
  }

  /** A property key that is not an identifier: its `.` is encoded, so it cannot pose as another class's method. */
  @Get('dotted')
  @RateLimit(ONE_PER_MINUTE)
  ['plain.x']() {
    return 'dotted';
  }
}

/** Two handlers without a name: an anonymous function and an arrow function, assigned to the prototype. */
@Controller('anonymous')
@RateLimit(ONE_PER_MINUTE)
class AnonymousController {}
const anonymous: Array<[string, () => string]> = [
  [
    'one',
    [
      function () {
        return 'one';
      },
    ][0],
  ],
  ['two', [() => 'two'][0]],
];
for (const [key, handler] of anonymous) {
  Object.defineProperty(AnonymousController.prototype, key, { value: handler, writable: true, configurable: true });
  Get(key)(AnonymousController.prototype, key, Object.getOwnPropertyDescriptor(AnonymousController.prototype, key)!);
}

/** Wraps `method` as tracing libraries do when they patch an instance: every wrapper is named `wrapped`, and carries no metadata. */
function wrap(method: (...args: unknown[]) => unknown): (...args: unknown[]) => unknown {
  return function wrapped(this: unknown, ...args: unknown[]) {
    return method.apply(this, args);
  };
}

/**
 * Handlers set on the instance by the constructor, which is what Nest calls (`instance[method]`): two wrappers
 * of the same name and a bound method. Each keeps its route's own counter and its method's own `@RateLimit`.
 */
@Controller('instance')
class InstanceHandlersController {
  constructor() {
    const self = this as unknown as Record<'one' | 'two' | 'three', (...args: unknown[]) => unknown>;
    self.one = wrap(InstanceHandlersController.prototype.one);
    self.two = wrap(InstanceHandlersController.prototype.two);
    self.three = self.three.bind(this);
  }

  @Get('one')
  @RateLimit(ONE_PER_MINUTE)
  one() {
    return 'one';
  }

  @Get('two')
  @RateLimit(ONE_PER_MINUTE)
  two() {
    return 'two';
  }

  @Get('three')
  @RateLimit({ ...ONE_PER_MINUTE, limit: 2 })
  three() {
    return 'three';
  }
}

/** A request-scoped controller that binds its handler in the constructor: a new handler function per request. */
@Controller({ path: 'per-request', scope: Scope.REQUEST })
@RateLimit({ ...ONE_PER_MINUTE, limit: 2 })
class PerRequestController {
  static created = 0;

  constructor() {
    PerRequestController.created++;
    this.find = this.find.bind(this);
  }

  @Get()
  find() {
    return 'found';
  }
}

describe.each(MATRIX)('route keys on $adapter with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let prefix: string;
  beforeAll(async () => {
    const options = await storeOptions(store, redis);
    prefix = options.prefix!;
    app = await bootApp({
      adapter,
      imports: [RateLimitModule.forRoot(options)],
      controllers: [TracedController, AnonymousController, InstanceHandlersController, PerRequestController],
    });
  });
  afterAll(async () => {
    await app.close();
    await redis.stop();
  });
  const status = async (path: string) => (await request(app.getHttpServer()).get(path)).status;

  it('two routes wrapped by the same decorator have separate counters', async () => {
    expect(TracedController.prototype.first.name).toBe('traced');
    expect(TracedController.prototype.second.name).toBe('traced');
    expect([await status('/traced/first'), await status('/traced/first')]).toEqual([200, 429]);
    expect([await status('/traced/second'), await status('/traced/second')]).toEqual([200, 429]);
    expect([await status('/traced/plain'), await status('/traced/plain')]).toEqual([200, 429]);
    expect([await status('/traced/dotted'), await status('/traced/dotted')]).toEqual([200, 429]);
  });

  it('two anonymous handlers have separate counters', async () => {
    expect(anonymous.map(([, handler]) => handler.name)).toEqual(['', '']);
    expect([await status('/anonymous/one'), await status('/anonymous/one')]).toEqual([200, 429]);
    expect([await status('/anonymous/two'), await status('/anonymous/two')]).toEqual([200, 429]);
  });

  it('handlers set on the instance keep their route: its own counter and its own @RateLimit', async () => {
    const instance = app.get(InstanceHandlersController);
    expect([instance.one.name, instance.two.name, instance.three.name]).toEqual(['wrapped', 'wrapped', 'bound three']);
    expect([await status('/instance/one'), await status('/instance/one')]).toEqual([200, 429]);
    expect([await status('/instance/two'), await status('/instance/two')]).toEqual([200, 429]);
    expect([await status('/instance/three'), await status('/instance/three'), await status('/instance/three')]).toEqual([200, 200, 429]);
  });

  it('a request-scoped controller that binds its handler answers every request, counted on one counter', async () => {
    const created = PerRequestController.created;
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push(await status('/per-request'));
    expect(statuses).toEqual([200, 200, 429, 429]);
    expect(PerRequestController.created - created).toBe(4); // a new instance, so a new handler function, each time
  });

  if (store === 'redis') {
    it('keys name the controller and the property key: r=<Controller>.<method>, the same on every boot', async () => {
      const client = await redis.client();
      const keys = (await client.keys(`${prefix}:*`)).map((key) => key.replace(/^.*\}:/, '')).sort();
      expect(keys).toEqual([
        'denies:carry-over', // the carry-over of 1.0 deny keys, done: <prefix>:{overrides}:denies:carry-over
        'instances', // the runtime-overrides poll's heartbeat: <prefix>:{overrides}:instances
        'r=AnonymousController.one:default:sl',
        'r=AnonymousController.two:default:sl',
        'r=InstanceHandlersController.one:default:sl',
        'r=InstanceHandlersController.three:default:sl',
        'r=InstanceHandlersController.two:default:sl',
        // A handler a request-scoped instance sets on itself is found under no key Nest knows of: keyed by its name.
        'r=PerRequestController.~bound%20find:default:sl',
        'r=TracedController.first:default:sl',
        'r=TracedController.plain%2Ex:default:sl',
        'r=TracedController.plain:default:sl',
        'r=TracedController.second:default:sl',
      ]);
    });
  }
});
