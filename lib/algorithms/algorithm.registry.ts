import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import type { RateLimitAlgorithmName } from '../interfaces/policy.interface';
import type { RateLimitAlgorithm } from './algorithm.interface';
import { ALGORITHM_CLASSES } from './index';
import { describeValue } from '../shared/describe-value';

/** Looks algorithms up by name. One instance per module (the Nest provider) or per standalone store. */
export class RateLimitAlgorithmRegistry {
  private readonly byName = new Map<string, RateLimitAlgorithm>();

  constructor(algorithms: readonly RateLimitAlgorithm[] = ALGORITHM_CLASSES.map((A) => new A() as RateLimitAlgorithm)) {
    for (const algorithm of algorithms) this.byName.set(algorithm.name, algorithm);
  }

  /** Every registered algorithm. */
  all(): RateLimitAlgorithm[] {
    return [...this.byName.values()];
  }

  /** The algorithm called `name`; a {@link RateLimitConfigError} listing the known names otherwise. */
  get(name: RateLimitAlgorithmName | string, field = 'algorithm'): RateLimitAlgorithm {
    const algorithm = this.byName.get(name);
    if (!algorithm) {
      throw new RateLimitConfigError(
        `${field}: ${describeValue(name)} is not a known algorithm; use one of ${[...this.byName.keys()].map((n) => `'${n}'`).join(', ')}.`,
      );
    }
    return algorithm;
  }
}
