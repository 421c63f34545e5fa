import type { ExecutionContext } from '@nestjs/common';
import type { RateLimitCriticality } from '../interfaces/overload.interface';
import { RateLimitPriorities } from '../rate-limit.decorator';
import { IntervalWarning } from '../shared/interval-warning';

type Target = object;

/**
 * The criticality of a call: `@RateLimitPriority` on its handler, else on its class, else the module's
 * `priority` function, else `'default'`. The decorators are read once per handler.
 */
export class CallCriticalities {
  private readonly declared = new WeakMap<Target, RateLimitCriticality | null>();
  private readonly warning = new IntervalWarning('RateLimitGuard');

  constructor(private readonly priority?: (context: ExecutionContext) => RateLimitCriticality) {}

  of(context: ExecutionContext): RateLimitCriticality {
    const handler = context.getHandler();
    let declared = this.declared.get(handler);
    if (declared === undefined) {
      declared = readPriority(handler) ?? readPriority(context.getClass()) ?? null;
      this.declared.set(handler, declared);
    }
    if (declared !== null) return declared;
    if (this.priority === undefined) return 'default';
    const answer: unknown = this.priority(context);
    if (answer === 'critical' || answer === 'default' || answer === 'sheddable') return answer;
    this.warning.warn(
      `RateLimitModule options: priority returned ${String(answer)}, not 'critical', 'default' or 'sheddable'; the call counts as 'default'.`,
    );
    return 'default';
  }
}

function readPriority(target: Target): RateLimitCriticality | undefined {
  return Reflect.getMetadata(RateLimitPriorities.KEY, target) as RateLimitCriticality | undefined;
}
