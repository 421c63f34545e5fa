import type { ExecutionContext } from '@nestjs/common';
import { RateLimitGuard } from '../../lib';
import type { RateLimitRouteRegistry } from '../../lib/routes/route-registry';
import type { RateLimitEngine } from '../../lib/rate-limit.engine';
import type { RateLimitHolds } from '../../lib/http/request-holds';

describe('RateLimitGuard', () => {
  it.each(['rpc', 'ws', 'graphql'])('lets %s contexts through without looking anything up', async (type) => {
    const plan = jest.fn();
    const guard = new RateLimitGuard({ plan } as unknown as RateLimitRouteRegistry, {} as RateLimitEngine, {} as RateLimitHolds, {});
    const context = { getType: () => type } as unknown as ExecutionContext;
    await expect(guard.canActivate(context)).resolves.toBe(true);
    expect(plan).not.toHaveBeenCalled();
  });
});
