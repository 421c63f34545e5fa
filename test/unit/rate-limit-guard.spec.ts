import 'reflect-metadata';
import { Controller, Get, type ExecutionContext } from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/internal';
import { Test } from '@nestjs/testing';
import { RateLimit, RateLimitExceededException, RateLimitGuard, RateLimitModule, type RateLimitModuleOptions } from '../../lib';
import type { RateLimitRouteRegistry } from '../../lib/routes/route-registry';
import type { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import type { RateLimitHolds } from '../../lib/http/request-holds';

/** A guard whose registry has no plan for anything, and the spy that tells whether it was asked. */
function guardWith(options: RateLimitModuleOptions) {
  const plan = jest.fn().mockReturnValue(null);
  const guard = new RateLimitGuard({ plan } as unknown as RateLimitRouteRegistry, {} as RateLimitEngine, {} as RateLimitHolds, options);
  return { guard, plan };
}

function contextOf(type: string, args: unknown[] = []): ExecutionContext {
  return {
    getType: () => type,
    getArgByIndex: (i: number) => args[i],
    getClass: () => class Handlers {},
    getHandler: () => function handler() {},
  } as unknown as ExecutionContext;
}

describe('RateLimitGuard', () => {
  it.each(['http', 'rpc', 'ws', 'graphql'])('looks up the plan of %s calls by default', async (type) => {
    const { guard, plan } = guardWith({});
    expect(guard.canActivate(contextOf(type))).toBe(true);
    expect(plan).toHaveBeenCalledTimes(1);
  });

  it.each(['rpc', 'ws', 'graphql'])('lets %s calls through without looking anything up when contexts leaves them out', async (type) => {
    const { guard, plan } = guardWith({ contexts: ['http'] });
    expect(guard.canActivate(contextOf(type))).toBe(true);
    expect(plan).not.toHaveBeenCalled();
  });

  it('lets calls of an unknown kind (a custom transport) through without looking anything up', async () => {
    const { guard, plan } = guardWith({});
    expect(guard.canActivate(contextOf('kafka-streams'))).toBe(true);
    expect(plan).not.toHaveBeenCalled();
  });

  it('skips GraphQL subscriptions unless limitSubscriptions is on', async () => {
    const subscription = () => contextOf('graphql', [{}, {}, {}, { operation: { operation: 'subscription' } }]);
    const skipping = guardWith({});
    await skipping.guard.canActivate(subscription());
    expect(skipping.plan).not.toHaveBeenCalled();
    const limiting = guardWith({ limitSubscriptions: true });
    await limiting.guard.canActivate(subscription());
    expect(limiting.plan).toHaveBeenCalledTimes(1);
    const query = guardWith({});
    await query.guard.canActivate(contextOf('graphql', [{}, {}, {}, { operation: { operation: 'query' } }]));
    expect(query.plan).toHaveBeenCalledTimes(1);
  });
});

describe('RateLimitGuard on the memory store', () => {
  @Controller()
  class PingController {
    @Get()
    @RateLimit({ algorithm: 'fixed-window', limit: 1, window: '1m' })
    ping() {}
  }

  function httpCall(): ExecutionContextHost {
    const headers: Record<string, string> = {};
    const host = new ExecutionContextHost([
      { ip: '10.0.0.1', headers: {} },
      { headers, setHeader: (n: string, v: string) => void (headers[n] = v) },
    ]);
    host.setType('http');
    return Object.assign(host, { getClass: () => PingController, getHandler: () => PingController.prototype.ping });
  }

  it('decides without a promise on a pass, and rejects a promise (never throws) on a rejection', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [RateLimitModule.forRoot({})], controllers: [PingController] }).compile();
    const guard = moduleRef.get(RateLimitGuard);
    expect(guard.canActivate(httpCall())).toBe(true);
    let rejected: boolean | Promise<boolean> | undefined;
    expect(() => (rejected = guard.canActivate(httpCall()))).not.toThrow();
    expect(rejected).toBeInstanceOf(Promise);
    await expect(rejected).rejects.toBeInstanceOf(RateLimitExceededException);
    await moduleRef.close();
  });
});
