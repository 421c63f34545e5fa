import 'reflect-metadata';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Test } from '@nestjs/testing';
import * as root from '../../lib';

/**
 * The root entry exports what the README and docs/ document and nothing internal (no stores, engine, registry,
 * algorithm classes or DI tokens used only inside); a new name here is a public promise under semver.
 */
const PUBLIC = [
  'GraphqlRateLimitExceededException',
  'GraphqlRateLimitOverloadedException',
  'PROBLEM_JSON_CONTENT_TYPE',
  'RATE_LIMIT_ALGORITHMS',
  'RATE_LIMIT_EVENTS',
  'RATE_LIMIT_OPTIONS',
  'RATE_LIMIT_QUOTA_EXCEEDED_TYPE',
  'RATE_LIMIT_TEMPORARY_REDUCED_CAPACITY_TYPE',
  'RateLimit',
  'RateLimitAdmin',
  'RateLimitConfigError',
  'RateLimitEvents',
  'RateLimitExceededException',
  'RateLimitExceededProblemException',
  'RateLimitGuard',
  'RateLimitModule',
  'RateLimitOutbound',
  'RateLimitOverloadedException',
  'RateLimitOverloadedProblemException',
  'RateLimitPolicies',
  'RateLimitPriorities',
  'RateLimitPriority',
  'RateLimitShutdownError',
  'RateLimitSkip',
  'RateLimitStoreError',
  'RateLimitStoreUnavailableException',
  'RateLimitStoreUnavailableProblemException',
  'RateLimitWaitError',
  'RateLimiterService',
  'SkipRateLimit',
  'clientIpKey',
  'parseDuration',
  'pauseAskedMs',
];

describe('the public surface', () => {
  it('is exactly the documented names, at most 45', () => {
    expect(Object.keys(root).sort()).toEqual(PUBLIC);
    expect(PUBLIC.length).toBeLessThanOrEqual(45);
  });

  it('names each runtime export somewhere in the README or docs/', () => {
    const docs = ['README.md', 'CHANGELOG.md', 'docs/']
      .flatMap((path) => (path.endsWith('/') ? listMarkdown(path) : [path]))
      .map((path) => readFileSync(join(__dirname, '..', '..', path), 'utf8'))
      .join('\n');
    expect(PUBLIC.filter((name) => !new RegExp(`\\b${name}\\b`).test(docs))).toEqual([]);
  });

  it('gives the administering and outbound injectables from the module, sharing one state with RateLimiterService', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [root.RateLimitModule.forRoot()] }).compile();
    await moduleRef.init();
    const policy: root.RateLimitPolicy = { algorithm: 'fixed-window', limit: 1, window: '1m' };
    const limiter = moduleRef.get(root.RateLimiterService);
    const admin = moduleRef.get(root.RateLimitAdmin);
    const outbound = moduleRef.get(root.RateLimitOutbound);
    expect((await limiter.consume(policy, 'user:1')).allowed).toBe(true);
    expect((await limiter.consume(policy, 'user:1')).allowed).toBe(false);
    await admin.reset(policy, 'user:1');
    expect((await outbound.acquire(policy, 'user:1', { maxWaitMs: 0 })).allowed).toBe(true);
    await admin.deny('user:2', '1m', 'test');
    expect(await limiter.denied('user:2')).toEqual(await admin.denied('user:2'));
    expect((await limiter.peek(policy, 'user:2')).reason).toBe('blocked');
    await moduleRef.close();
    await expect(admin.denied('user:2')).rejects.toBeInstanceOf(root.RateLimitShutdownError);
    await expect(limiter.consume(policy, 'user:3')).rejects.toBeInstanceOf(root.RateLimitShutdownError);
  });
});

function listMarkdown(dir: string): string[] {
  return readdirSync(join(__dirname, '..', '..', dir))
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(dir, name));
}
