import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import type { INestApplication } from '@nestjs/common';
import { Args, GraphQLModule, Mutation, Query, Resolver, Subscription } from '@nestjs/graphql';
import { createClient, type Client } from 'graphql-ws';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import WebSocket from 'ws';
import { RateLimit, RateLimitModule, RateLimitPriority, SkipRateLimit } from '../../lib';
import { Gate } from '../support/gate';
import { pressureSignal } from '../support/pressure';
import { apolloModule } from './graphql-app';
import { ADAPTERS, bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

const typeDefs = /* GraphQL */ `
  type Query {
    cats: [String!]
    dogs: [String!]
    birds: [String!]
    open: String
  }
  type Mutation {
    login(username: String!): Boolean
  }
`;

@Resolver()
@RateLimit('sliding-log', 3, '1m', { name: 'resolver' })
class AnimalsResolver {
  @Query('cats')
  @RateLimit('sliding-log', 2, '1m')
  cats() {
    return ['tom'];
  }

  @Query('dogs')
  @RateLimit('sliding-log', 5, '1m', { name: 'dogs' })
  dogs() {
    return ['rex'];
  }

  /** Limited by the class policy. */
  @Query('birds')
  birds() {
    return ['tweety'];
  }

  @Query('open')
  @SkipRateLimit()
  open() {
    return 'ok';
  }

  /** Per username, whatever the address: the tracker comes from the field's arguments. */
  @Mutation('login')
  @RateLimit('sliding-log', 1, '1m', { by: (context) => `login:${context.getArgByIndex<{ username: string }>(1).username}` })
  login(@Args('username') _username: string) {
    return true;
  }
}

/** What Apollo reports for a field the guard rejected: a rate-limit code, not Nest's `INTERNAL_SERVER_ERROR`. */
function rateLimitedError(field: string, retryAfter: number, column: number) {
  return {
    message: 'Too Many Requests',
    locations: [{ line: 1, column }],
    path: [field],
    extensions: { code: 'RATE_LIMITED', retryAfter },
  };
}

describe.each(MATRIX)('GraphQL (Apollo on $adapter) with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;

  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis), apolloModule(typeDefs, { adapter })],
      providers: [AnimalsResolver],
    });
  });
  afterAll(async () => {
    await app?.close();
    await redis.stop();
  });

  const gql = (query: string) => request(app.getHttpServer()).post('/graphql').send({ query });

  it('limits a field by its own policy, with headers on the HTTP response, and rejects with a GraphQL error', async () => {
    for (const remaining of [1, 0]) {
      const res = await gql('{ cats }');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ data: { cats: ['tom'] } });
      expect(res.headers['ratelimit-policy']).toBe('"default";q=2;w=60');
      expect(res.headers['ratelimit']).toBe(`"default";r=${remaining};t=60`);
    }
    const limited = await gql('{ cats }');
    expect(limited.status).toBe(200);
    expect(limited.body).toEqual({ data: { cats: null }, errors: [rateLimitedError('cats', 60, 3)] });
    expect(limited.headers['ratelimit']).toBe('"default";r=0;t=60');
    expect(limited.headers['retry-after']).toBe('60');
  });

  it('keeps quotas per field: one exhausted field does not touch another in the same query', async () => {
    const res = await gql('{ cats dogs }');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { cats: null, dogs: ['rex'] }, errors: [rateLimitedError('cats', 60, 3)] });
    const dogs = await gql('{ dogs }');
    expect(dogs.headers['ratelimit']).toBe('"dogs";r=3;t=60');
  });

  it('counts every resolver call: two aliases of one field in a query take two units', async () => {
    const res = await gql('{ a: dogs b: dogs }');
    expect(res.body).toEqual({ data: { a: ['rex'], b: ['rex'] } });
    expect((await gql('{ dogs }')).headers['ratelimit']).toBe('"dogs";r=0;t=60');
    const limited = await gql('{ dogs }');
    expect(limited.body.data).toEqual({ dogs: null });
    expect(limited.body.errors).toEqual([rateLimitedError('dogs', 60, 3)]);
  });

  it('applies the resolver class policy to fields without their own, and skips @SkipRateLimit fields', async () => {
    const birds = [];
    for (let i = 0; i < 4; i++) birds.push((await gql('{ birds }')).body.data.birds);
    expect(birds).toEqual([['tweety'], ['tweety'], ['tweety'], null]);
    for (let i = 0; i < 5; i++) {
      const res = await gql('{ open }');
      expect(res.body).toEqual({ data: { open: 'ok' } });
      expect(res.headers['ratelimit']).toBeUndefined();
    }
  });

  it('tracks by a function of the field arguments (the ExecutionContext), independently of the address', async () => {
    const login = (username: string) => gql(`mutation { login(username: "${username}") }`);
    expect((await login('ann')).body).toEqual({ data: { login: true } });
    const limited = await login('ann');
    expect(limited.body.data).toEqual({ login: null });
    expect(limited.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: 60 });
    expect((await login('bob')).body).toEqual({ data: { login: true } });
  });
});

describe('GraphQL (Apollo on fastify) with the default context', () => {
  const redis = new SharedRedis();
  let app: INestApplication;

  beforeAll(async () => {
    app = await bootApp({
      adapter: 'fastify',
      imports: [await rateLimitModule('memory', redis), apolloModule(typeDefs)],
      providers: [AnimalsResolver],
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('still limits by the request address, but has no reply to write headers on', async () => {
    const gql = () => request(app.getHttpServer()).post('/graphql').send({ query: '{ cats }' });
    const responses = [await gql(), await gql(), await gql()];
    expect(responses.map((r) => r.body)).toEqual([
      { data: { cats: ['tom'] } },
      { data: { cats: ['tom'] } },
      { data: { cats: null }, errors: [rateLimitedError('cats', 60, 3)] },
    ]);
    for (const res of responses) {
      expect(res.headers['ratelimit']).toBeUndefined();
      expect(res.headers['retry-after']).toBeUndefined();
    }
  });
});

const overloadTypeDefs = /* GraphQL */ `
  type Query {
    report: String
    search: String
    health: String
  }
`;

@Resolver()
class OverloadResolver {
  constructor(private readonly gate: Gate) {}

  /** Two in flight at most (its initial limit; no window completes here, so it stays there). */
  @Query('report')
  @RateLimit({ algorithm: 'adaptive', name: 'capacity', limit: 100, adaptive: { initial: 2 } })
  async report() {
    await this.gate.pass();
    return 'ready';
  }

  @Query('search')
  @RateLimitPriority('sheddable')
  @RateLimit('sliding-log', 5, '1m')
  search() {
    return 'found';
  }

  @Query('health')
  @RateLimitPriority('critical')
  health() {
    return 'ok';
  }
}

/** What Apollo reports for a field refused because the instance is short of capacity: a code of its own. */
function overloadedError(field: string, message: string, retryAfter: number, column: number) {
  return { message, locations: [{ line: 1, column }], path: [field], extensions: { code: 'SERVICE_UNAVAILABLE', retryAfter } };
}

const AT_CAPACITY = 'Service Unavailable: this instance is at its capacity; retry later.';
const SHEDDING = 'Service Unavailable: this instance is shedding load; retry later.';

describe.each(ADAPTERS)('GraphQL (Apollo on %s) short of capacity', (adapter) => {
  let app: INestApplication;
  let gate: Gate;
  let pressure: ReturnType<typeof pressureSignal>;

  beforeEach(async () => {
    app = await bootApp({
      adapter,
      imports: [RateLimitModule.forRoot({ loadShedding: { sampleIntervalMs: 60_000 } }), apolloModule(overloadTypeDefs, { adapter })],
      providers: [OverloadResolver, Gate],
    });
    gate = app.get(Gate);
    pressure = pressureSignal(app);
  });
  afterEach(async () => {
    gate?.release();
    pressure?.restore();
    await app?.close();
  });

  const gql = (query: string) => request(app.getHttpServer()).post('/graphql').send({ query });

  it("refuses a field beyond its adaptive limit with a 'SERVICE_UNAVAILABLE' error and Retry-After; the other fields resolve", async () => {
    const held = [gql('{ report }').then((r) => r), gql('{ report }').then((r) => r)];
    while (gate.inside < 2) await sleep(5);
    const refused = await gql('{ report health }');
    expect({ status: refused.status, body: refused.body as unknown }).toEqual({
      status: 200,
      body: { data: { report: null, health: 'ok' }, errors: [overloadedError('report', AT_CAPACITY, 1, 3)] },
    });
    expect({
      retryAfter: refused.headers['retry-after'],
      policy: refused.headers['ratelimit-policy'],
      quota: refused.headers['ratelimit'],
    }).toEqual({ retryAfter: '1', policy: '"capacity";q=2;qu="concurrent-requests"', quota: '"capacity";r=0' });
    gate.release();
    expect((await Promise.all(held)).map((r) => r.body as unknown)).toEqual([{ data: { report: 'ready' } }, { data: { report: 'ready' } }]);
    // Both slots are free again once their operations are over.
    gate.close();
    const again = [gql('{ report }').then((r) => r), gql('{ report }').then((r) => r)];
    while (gate.inside < 2) await sleep(5);
    gate.release();
    expect((await Promise.all(again)).map((r) => r.status)).toEqual([200, 200]);
  });

  it("refuses 'sheddable' fields under pressure with a 'SERVICE_UNAVAILABLE' error, charging nothing; critical ones resolve", async () => {
    pressure.press();
    const refused = await gql('{ search health }');
    expect({ status: refused.status, body: refused.body as unknown }).toEqual({
      status: 200,
      body: { data: { search: null, health: 'ok' }, errors: [overloadedError('search', SHEDDING, 60, 3)] },
    });
    expect({ retryAfter: refused.headers['retry-after'], quota: refused.headers['ratelimit'] }).toEqual({
      retryAfter: '60',
      quota: undefined,
    });
    pressure.calm();
    const served = await gql('{ search }');
    expect({ body: served.body as unknown, quota: served.headers['ratelimit'] }).toEqual({
      body: { data: { search: 'found' } },
      quota: '"default";r=4;t=60',
    });
  });
});

const subscriptionTypeDefs = /* GraphQL */ `
  type Query {
    now: Int
  }
  type Subscription {
    ticks: Int
  }
`;

@Resolver()
class TicksResolver {
  @Query('now')
  now() {
    return 0;
  }

  @Subscription('ticks')
  @RateLimit('sliding-log', 1, '1m', { name: 'ticks' })
  ticks() {
    return (async function* () {
      yield { ticks: 1 };
      yield { ticks: 2 };
    })();
  }
}

const TICKS = [{ data: { ticks: 1 } }, { data: { ticks: 2 } }];

describe.each([
  { limitSubscriptions: false, second: TICKS },
  {
    limitSubscriptions: true,
    // graphql-ws reports the error itself (no Apollo formatting); graphql-js still copies the exception's `extensions`.
    second: [
      {
        errors: [
          {
            message: 'Too Many Requests',
            locations: [{ line: 1, column: 16 }],
            path: ['ticks'],
            extensions: { code: 'RATE_LIMITED', retryAfter: 60 },
          },
        ],
      },
    ],
  },
])('GraphQL subscriptions over graphql-ws with limitSubscriptions: $limitSubscriptions', ({ limitSubscriptions, second }) => {
  const redis = new SharedRedis();
  let app: INestApplication;
  let client: Client;

  beforeAll(async () => {
    app = await bootApp({
      adapter: 'express',
      imports: [
        await rateLimitModule('memory', redis, { limitSubscriptions }),
        GraphQLModule.forRoot<ApolloDriverConfig>({
          driver: ApolloDriver,
          typeDefs: subscriptionTypeDefs,
          graphiql: false,
          subscriptions: { 'graphql-ws': true },
        }),
      ],
      providers: [TicksResolver],
    });
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address() as AddressInfo;
    client = createClient({ url: `ws://127.0.0.1:${port}/graphql`, webSocketImpl: WebSocket, retryAttempts: 0 });
  });
  afterAll(async () => {
    await client?.dispose();
    await app?.close();
  });

  /** Every result a subscription delivers until it completes. */
  const subscribe = () =>
    new Promise<unknown[]>((resolve, reject) => {
      const results: unknown[] = [];
      client.subscribe(
        { query: 'subscription { ticks }' },
        { next: (r) => results.push(r), error: reject, complete: () => resolve(results) },
      );
    });

  it(limitSubscriptions ? 'limits subscribe calls like any field' : 'lets subscriptions through by default', async () => {
    expect(await subscribe()).toEqual(TICKS);
    expect(await subscribe()).toEqual(second);
  });
});
