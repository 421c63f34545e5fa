/**
 * `nestjs-redis-ratelimit/testing`: a testing module with a controllable clock, and assertions on rate-limited
 * responses. For tests only; framework-agnostic (no jest import), so any runner can use it.
 * @packageDocumentation
 */
export { RateLimitTestingModule, type RateLimitTestingOptions } from './rate-limit-testing.module';
export { RateLimitTestClock, RATE_LIMIT_TEST_START } from './rate-limit-test-clock';
export {
  expectRateLimited,
  expectNotRateLimited,
  readRateLimitHeaders,
  type RateLimitTestResponse,
  type RateLimitResponseInfo,
  type RateLimitQuotaHeader,
  type RateLimitPolicyHeader,
  type RateLimitExpectation,
  type RateLimitedExpectation,
} from './rate-limit-assertions';
