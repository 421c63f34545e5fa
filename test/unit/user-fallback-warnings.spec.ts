/**
 * The `by: 'user'` warning: once per route whatever the calls and the clients, naming where the user is read
 * from in each kind of context, and never for a microservice message (which has no user: `'user'` means its
 * default tracker there).
 */
import { Logger } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { GraphqlRateLimitContext } from '../../lib/contexts/graphql.context';
import { RpcRateLimitContext } from '../../lib/contexts/rpc.context';
import { WsRateLimitContext } from '../../lib/contexts/ws.context';
import type { TrackerSource } from '../../lib/http/tracker';
import { buildRoutePlan } from '../../lib/routes/route-plan';
import { UserFallbackWarnings } from '../../lib/routes/user-fallback-warnings';

const registry = new RateLimitAlgorithmRegistry();
const planOf = (route: string) =>
  buildRoutePlan(
    {
      policies: [{ algorithm: 'gcra', limit: 5, window: '1s', by: 'user' }],
      where: `@RateLimit on ${route}`,
      route,
      scopeKey: `r=${route}`,
    },
    registry,
  );
const source = (userSource: string | undefined): TrackerSource => ({ defaultTracker: () => 'ip:203.0.113.7', user: undefined, userSource });

describe('UserFallbackWarnings', () => {
  let warn: jest.SpyInstance;
  beforeEach(() => {
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });
  afterEach(() => warn.mockRestore());

  it('warns once per route, however many anonymous calls come', () => {
    const warnings = new UserFallbackWarnings();
    const [a, b] = [planOf('C.a'), planOf('C.b')];
    for (let i = 0; i < 1_000; i++) warnings.anonymous(a, a.groups[0], source('req.user'));
    warnings.anonymous(b, b.groups[0], source('req.user'));
    warnings.anonymous(b, b.groups[0], source('req.user'));
    expect(warn.mock.calls.map(([m]) => (m as string).slice(0, 70))).toEqual([
      "by: 'user' on C.a (policy 'default'): a call came with no req.user (or",
      "by: 'user' on C.b (policy 'default'): a call came with no req.user (or",
    ]);
  });

  it('names where each context reads the user, and says nothing for a microservice message', () => {
    const warnings = new UserFallbackWarnings();
    const ws = Object.create(WsRateLimitContext.prototype) as WsRateLimitContext;
    const graphql = Object.create(GraphqlRateLimitContext.prototype) as GraphqlRateLimitContext;
    const rpc: TrackerSource = Object.create(RpcRateLimitContext.prototype) as RpcRateLimitContext;
    expect([ws.userSource, graphql.userSource, rpc.userSource]).toEqual([
      'client.data.user or client.user',
      'req.user in the GraphQL context',
      undefined,
    ]);
    const plan = planOf('Gateway.on');
    warnings.anonymous(plan, plan.groups[0], source(undefined));
    expect(warn).not.toHaveBeenCalled();
    warnings.anonymous(plan, plan.groups[0], source(ws.userSource));
    expect(warn.mock.calls[0][0]).toContain('a call came with no client.data.user or client.user (or one without user.id or user.sub)');
  });
});
