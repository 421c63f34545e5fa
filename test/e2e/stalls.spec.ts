/**
 * Over HTTP, on Express and Fastify: six requests to a route limited to 3 per minute, and this process's event
 * loop blocked for 150, 300 or 600 ms right after the sixth decision went to the store (longer than the default
 * 100 ms storeTimeoutMs). Exactly 3 are admitted and 3 get 429, none is decided by a fallback, and the next
 * request is decided by the store (a fallback's answer carries no `RateLimit` member). Memory store, a real
 * redis-server and a real 3-master Cluster, with default options but for hot-key shedding: requests arrive one
 * by one here, and shedding answers a key it saw spent without asking the store, so the sixth decision might
 * never be sent (the service-level spec, test/integration/stalls.redis.spec.ts, keeps every default).
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import { Cluster } from 'ioredis';
import request from 'supertest';
import { RateLimit, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import { libraryCluster, startRedisCluster, type RedisClusterProcess } from '../support/redis-server';
import { blockLoop, stallAfterSending } from '../support/stall';
import { ADAPTERS, bootApp, SharedRedis, type AdapterName } from './harness';

@Controller()
@RateLimit({ algorithm: 'sliding-log', limit: 3, window: '1m' })
class StallController {
  @Get('a')
  a(): string {
    return 'a';
  }

  @Get('b')
  b(): string {
    return 'b';
  }
}

type Backend = 'memory' | 'redis' | 'cluster';
const STALLS = [150, 300, 600];

const redis = new SharedRedis();
let cluster: RedisClusterProcess | undefined;
let clusterClient: Cluster | undefined;
let prefixes = 0;

beforeAll(async () => {
  cluster = await startRedisCluster(3);
  clusterClient = await libraryCluster(cluster.startupNodes);
  // A new cluster's nodes may still agree on the slot map: the stall cases time the store, not the cluster's start.
  await Promise.all(Array.from({ length: 64 }, (_, i) => clusterClient!.set(`warm{${i}}`, '1', 'PX', 1_000)));
}, 60_000);

afterAll(async () => {
  clusterClient?.disconnect();
  await Promise.all([redis.stop(), cluster?.stop()]);
});

async function storeOf(backend: Backend): Promise<Pick<RateLimitModuleOptions, 'redis'>> {
  if (backend === 'redis') return { redis: await redis.client() };
  if (backend === 'cluster') return { redis: clusterClient };
  return {};
}

describe.each(ADAPTERS)('%s', (adapter: AdapterName) => {
  describe.each<Backend>(['memory', 'redis', 'cluster'])('%s store, default options', (backend) => {
    let app: INestApplication | undefined;
    afterEach(async () => {
      await app?.close();
      app = undefined;
    });

    it.each(STALLS)('six requests (limit 3), then a %s ms stall: 200 ×3, 429 ×3, none by a fallback', async (ms) => {
      const storeErrors: Error[] = [];
      let decided = 0;
      const options: RateLimitModuleOptions = {
        ...(await storeOf(backend)),
        prefix: `stall${process.pid}-${++prefixes}`,
        hotKeyShedding: false,
        hooks: {
          storeError: (e) => storeErrors.push(e),
          // The memory store decides at once: block the loop once the sixth decision is made.
          decision: () => {
            if (backend === 'memory' && ++decided === 6) blockLoop(ms);
          },
        },
      };
      app = await bootApp({ adapter, imports: [RateLimitModule.forRoot(options)], controllers: [StallController] });
      const server = app.getHttpServer();
      const stall = stallAfterSending(6, ms);
      let responses: request.Response[];
      try {
        responses = await Promise.all(Array.from({ length: 6 }, () => request(server).get('/a')));
      } finally {
        stall.restore();
      }
      expect(stall.happened || backend === 'memory').toBe(true);
      expect(storeErrors.map((e) => e.message)).toEqual([]);
      expect(responses.map((r) => r.status).sort()).toEqual([200, 200, 200, 429, 429, 429]);
      // A fallback's answer has no RateLimit member; the store's has one per policy.
      expect(responses.map((r) => r.headers['ratelimit'] !== undefined)).toEqual([true, true, true, true, true, true]);
      const next = await request(server).get('/b');
      expect(next.status).toBe(200);
      expect(next.headers['ratelimit']).toBe('"default";r=2;t=60');
      expect(storeErrors).toEqual([]);
    });
  });
});
