import type { ExecutionContext } from '@nestjs/common';
import type { RateLimitContextAdapter } from '../contexts/rate-limit-context';
import { HttpExchange } from '../http/http-exchange';
import type { RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { planWithout, type RoutePlan } from './route-plan';
import type { UserFunctionDeadlines } from './user-function-deadlines';

const describeModuleSkipIf = () => 'RateLimitModule options: skipIf';

/**
 * Which of a route's policies a call is exempt from: `ignoreUserAgents`, then the module's `skipIf` (any of them
 * exempts it from every policy), then the policies' own `skipIf` (each exempts it from its policy).
 */
export class RouteSkips {
  /** `ignoreUserAgents` without the `g` and `y` flags (which make `test` stateful); `undefined` when empty. */
  private readonly ignoredAgents: RegExp[] | undefined;
  /** The module exempts some calls (`skipIf`, `ignoreUserAgents`): only then is any call asked about it. */
  private readonly skipsCalls: boolean;
  private readonly skipIf: RateLimitModuleOptions['skipIf'];

  constructor(
    { ignoreUserAgents, skipIf }: Pick<RateLimitModuleOptions, 'ignoreUserAgents' | 'skipIf'>,
    private readonly deadlines: UserFunctionDeadlines,
  ) {
    const agents = ignoreUserAgents ?? [];
    this.ignoredAgents = agents.length > 0 ? agents.map((r) => new RegExp(r.source, r.flags.replace(/[gy]/g, ''))) : undefined;
    this.skipIf = skipIf;
    this.skipsCalls = this.ignoredAgents !== undefined || skipIf !== undefined;
  }

  /**
   * The plan the call is decided against: `plan` itself when nothing can exempt it (the usual route, answered
   * at once), `plan` without the policies it is exempt from, or `null` when it is exempt from all of them. A
   * promise only when a `skipIf` answers with one.
   */
  rest(context: ExecutionContext, caller: RateLimitContextAdapter, plan: RoutePlan): RoutePlan | null | Promise<RoutePlan | null> {
    if (!this.skipsCalls && plan.skippable === undefined) return plan;
    if (this.ignoredAgents && caller instanceof HttpExchange && this.isIgnoredAgent(caller)) return null;
    const { skipIf } = this;
    if (skipIf) {
      const skip = this.deadlines.bound(skipIf(context), describeModuleSkipIf);
      if (skip instanceof Promise) return skip.then((yes) => (yes ? null : this.policiesLeft(context, plan)));
      if (skip) return null;
    }
    return this.policiesLeft(context, plan);
  }

  /** Asks each policy's `skipIf`; the plan of the policies that are left. */
  private policiesLeft(context: ExecutionContext, plan: RoutePlan): RoutePlan | null | Promise<RoutePlan | null> {
    const { skippable } = plan;
    if (skippable === undefined) return plan;
    const answers = skippable.map((i) => {
      const policy = plan.policies[i];
      return this.deadlines.bound(policy.compiled.policy.skipIf!(context), () => policy.describe('skipIf'));
    });
    const rest = (skips: readonly boolean[]) => {
      let mask = 0;
      skips.forEach((skip, n) => {
        if (skip) mask |= 1 << skippable[n];
      });
      return planWithout(plan, mask);
    };
    if (answers.some((a) => a instanceof Promise)) return Promise.all(answers).then(rest);
    return rest(answers as boolean[]);
  }

  private isIgnoredAgent(exchange: HttpExchange): boolean {
    const agent = exchange.request.headers['user-agent'];
    if (typeof agent !== 'string') return false;
    for (const pattern of this.ignoredAgents!) if (pattern.test(agent)) return true;
    return false;
  }
}
