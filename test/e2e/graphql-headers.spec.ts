import type { INestApplication } from '@nestjs/common';
import { Query, Resolver } from '@nestjs/graphql';
import { parseList } from 'structured-headers';
import request from 'supertest';
import { RateLimit } from '../../lib';
import { apolloModule } from './graphql-app';
import { bootApp, MATRIX, rateLimitModule, SharedRedis } from './harness';

const typeDefs = /* GraphQL */ `
  type Query {
    tight: String
    roomy: String
    pair: String
  }
`;

@Resolver()
class LimitedResolver {
  @Query('tight')
  @RateLimit('sliding-log', 1, '1m', { name: 'tight' })
  tight() {
    return 'tight';
  }

  @Query('roomy')
  @RateLimit('sliding-log', 5, '1m', { name: 'roomy' })
  roomy() {
    return 'roomy';
  }

  @Query('pair')
  @RateLimit('sliding-log', 3, '1m', { name: 'pair' })
  pair() {
    return 'pair';
  }
}

/** A `RateLimit` or `RateLimit-Policy` field, parsed (RFC 9651), as `{ name → parameters }`. */
function members(field: string | undefined): Record<string, Record<string, unknown>> {
  expect(field).toBeDefined();
  const list = parseList(field as string);
  const byName = Object.fromEntries(list.map(([name, params]) => [String(name), Object.fromEntries(params)]));
  expect(Object.keys(byName)).toHaveLength(list.length); // one member per policy name
  return byName;
}

const rateLimited = (path: string) => ({
  message: 'Too Many Requests',
  locations: [{ line: 1, column: expect.any(Number) }],
  path: [path],
  extensions: { code: 'RATE_LIMITED', retryAfter: 60 },
});

describe.each(MATRIX)('GraphQL headers of a whole operation (Apollo on $adapter, $store store)', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;

  beforeAll(async () => {
    app = await bootApp({
      adapter,
      // draft-10 lists every field's policies beside a rejection (draft-11 only the violated ones: see below).
      imports: [await rateLimitModule(store, redis, { headers: 'both', headerProfile: 'draft-10' }), apolloModule(typeDefs, { adapter })],
      providers: [LimitedResolver],
    });
  });
  afterAll(async () => {
    await app?.close();
    await redis.stop();
  });

  const gql = (query: string) => request(app.getHttpServer()).post('/graphql').send({ query });

  it('answers an operation whose only field is rejected with 200, a RATE_LIMITED error and Retry-After', async () => {
    expect((await gql('{ tight }')).body).toEqual({ data: { tight: 'tight' } });
    const res = await gql('{ tight }');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { tight: null }, errors: [rateLimited('tight')] });
    expect(res.headers['retry-after']).toBe('60');
    expect(members(res.headers['ratelimit'])).toEqual({ tight: { r: 0, t: 60 } });
  });

  it.each([
    { query: '{ tight roomy }', roomyLeft: 4 },
    { query: '{ roomy tight }', roomyLeft: 3 },
  ])('merges every field into the headers of $query, the rejected one included', async ({ query, roomyLeft }) => {
    const res = await gql(query);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: { tight: null, roomy: 'roomy' }, errors: [rateLimited('tight')] });
    expect(members(res.headers['ratelimit-policy'])).toEqual({ tight: { q: 1, w: 60 }, roomy: { q: 5, w: 60 } });
    expect(members(res.headers['ratelimit'])).toEqual({ tight: { r: 0, t: 60 }, roomy: { r: roomyLeft, t: 60 } });
    expect(res.headers['retry-after']).toBe('60');
    // Legacy headers describe the most restrictive field: the rejected one.
    expect([res.headers['x-ratelimit-limit'], res.headers['x-ratelimit-remaining'], res.headers['x-ratelimit-reset']]).toEqual([
      '1',
      '0',
      '60',
    ]);
  });

  it('keeps one member per policy name, the most restrictive, when aliases of a field report the same policy', async () => {
    const first = await gql('{ a: pair b: pair }');
    expect(first.body).toEqual({ data: { a: 'pair', b: 'pair' } });
    expect(members(first.headers['ratelimit'])).toEqual({ pair: { r: 1, t: 60 } });
    expect(first.headers['x-ratelimit-remaining']).toBe('1');
    const second = await gql('{ a: pair b: pair }');
    expect(Object.values(second.body.data).sort()).toEqual([null, 'pair']); // sort() compares 'null' < 'pair'
    expect(second.body.errors).toHaveLength(1);
    expect(second.body.errors[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfter: 60 });
    expect(members(second.headers['ratelimit-policy'])).toEqual({ pair: { q: 3, w: 60 } });
    expect(members(second.headers['ratelimit'])).toEqual({ pair: { r: 0, t: 60 } });
  });
});

describe.each(MATRIX)('GraphQL headers under draft-11, the default (Apollo on $adapter, $store store)', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;

  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis), apolloModule(typeDefs, { adapter })],
      providers: [LimitedResolver],
    });
  });
  afterAll(async () => {
    await app?.close();
    await redis.stop();
  });

  const gql = (query: string) => request(app.getHttpServer()).post('/graphql').send({ query });

  it('an operation with a rejected field lists only the violated policies, none with a t beyond Retry-After', async () => {
    const allowed = await gql('{ roomy tight }');
    expect(allowed.body).toEqual({ data: { roomy: 'roomy', tight: 'tight' } });
    expect(members(allowed.headers['ratelimit'])).toEqual({ roomy: { r: 4, t: 60 }, tight: { r: 0, t: 60 } });
    const res = await gql('{ roomy tight }');
    expect(res.body).toEqual({ data: { tight: null, roomy: 'roomy' }, errors: [rateLimited('tight')] });
    expect(members(res.headers['ratelimit-policy'])).toEqual({ roomy: { q: 5, w: 60 }, tight: { q: 1, w: 60 } });
    expect(res.headers['retry-after']).toBe('60');
    expect(members(res.headers['ratelimit'])).toEqual({ tight: { r: 0, t: 60 } });
  });
});
