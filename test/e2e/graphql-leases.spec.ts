import type { INestApplication } from '@nestjs/common';
import { Args, Int, Query, Resolver } from '@nestjs/graphql';
import request from 'supertest';
import { RateLimit } from '../../lib';
import { apolloModule } from './graphql-app';
import { bootApp, MATRIX, rateLimitModule, SharedRedis, sleep } from './harness';

/** A lease window shorter than the work: renewed every 100 ms while the operation runs. */
const LEASE_MS = 300;
const LONG_MS = 900;

const typeDefs = /* GraphQL */ `
  type Query {
    slow(ms: Int!): String
  }
`;

/** When the running `slow` resolver started (performance.now()), or undefined. */
let slowSince: number | undefined;

@Resolver()
class SlowResolver {
  @Query('slow')
  @RateLimit({ algorithm: 'concurrency', limit: 1, window: LEASE_MS, name: 'slow' })
  async slow(@Args('ms', { type: () => Int }) ms: number) {
    if (ms > 0) slowSince = performance.now();
    try {
      await sleep(ms);
    } finally {
      if (ms > 0) slowSince = undefined;
    }
    return 'done';
  }
}

describe.each(MATRIX)('GraphQL concurrency leases (Apollo on $adapter) with the $store store', ({ adapter, store }) => {
  const redis = new SharedRedis();
  let app: INestApplication;

  beforeAll(async () => {
    app = await bootApp({
      adapter,
      imports: [await rateLimitModule(store, redis), apolloModule(typeDefs, { adapter })],
      providers: [SlowResolver],
    });
    await app.listen(0, '127.0.0.1');
  });
  afterAll(async () => {
    await app?.close();
    await redis.stop();
  });

  /** Whether a `slow` query of `ms` got its field (true) or the field's rate-limit error (false). */
  async function slow(ms: number): Promise<boolean> {
    const res = await request(app.getHttpServer())
      .post('/graphql')
      .send({ query: `{ slow(ms: ${ms}) }` });
    expect(res.status).toBe(200);
    if (res.body.data?.slow === 'done') return true;
    expect(res.body.errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');
    return false;
  }

  /**
   * One long query with three probes into its work; `stalledMs` is the longest this process's event loop went
   * without turning meanwhile (a 10 ms timer's longest gap).
   */
  async function probeLongQuery(): Promise<{ long: boolean; probes: Array<{ at: number; admitted: boolean }>; stalledMs: number }> {
    let last = performance.now();
    let stalledMs = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      stalledMs = Math.max(stalledMs, now - last);
      last = now;
    }, 10);
    try {
      const long = slow(LONG_MS);
      const started = performance.now();
      while (slowSince === undefined && performance.now() - started < 5_000) await sleep(5);
      const since = slowSince!;
      const probes: Array<{ at: number; admitted: boolean }> = [];
      for (const at of [100, 400, 700]) {
        await sleep(since + at - performance.now());
        const sentAt = Math.round(performance.now() - since);
        probes.push({ at: sentAt, admitted: await slow(0) });
      }
      return { long: await long, probes, stalledMs };
    } finally {
      clearInterval(ticker);
    }
  }

  it(`a resolver working ${LONG_MS} ms keeps its ${LEASE_MS} ms lease the whole time, and frees it with the response`, async () => {
    // A lease is renewed every third of its window by this process's timers. When the process itself stalls
    // for two thirds of a window, the lease rightly expires (as a dead holder's must): that attempt proves
    // nothing about renewals, so it runs again, up to five times.
    let result = await probeLongQuery();
    for (let attempt = 1; attempt < 5 && result.stalledMs >= (2 * LEASE_MS) / 3; attempt++) result = await probeLongQuery();
    expect(result.stalledMs).toBeLessThan((2 * LEASE_MS) / 3);
    expect(result.long).toBe(true);
    // Past two lease windows into the work, the slot was still held: renewed, not expired.
    expect(result.probes.map((p) => p.admitted)).toEqual([false, false, false]);
    expect(result.probes[2].at).toBeGreaterThanOrEqual(2 * LEASE_MS);
    // The response is over: the slot is free at once, not a window later.
    expect(await slow(0)).toBe(true);
    expect(await slow(0)).toBe(true);
  });
});
