import { RateLimitConfigError } from '../errors/rate-limit-config.error';
import { RATE_LIMIT_CONTEXT_TYPES, RATE_LIMIT_HEADER_PROFILES, type RateLimitModuleOptions } from '../interfaces/module-options.interface';
import { hidePassword } from '../shared/hide-password';
import { describeValue } from '../shared/describe-value';

const KNOWN_OPTIONS = new Set([
  'redis',
  'prefix',
  'defaultPolicy',
  'headers',
  'headerProfile',
  'onStoreError',
  'storeTimeoutMs',
  'userFunctionTimeoutMs',
  'registerGuard',
  'mode',
  'shadowHeaders',
  'memory',
  'ipv6Subnet',
  'errorMessage',
  'errorFormat',
  'insuranceShare',
  'hotKeyShedding',
  'batchDecisions',
  'storeErrorLogIntervalMs',
  'maxWaiters',
  'hooks',
  'nearLimitRatio',
  'contexts',
  'limitSubscriptions',
  'skipIf',
  'ignoreUserAgents',
  'priority',
  'loadShedding',
]);
const CONTEXT_TYPES: readonly string[] = RATE_LIMIT_CONTEXT_TYPES;

/** Checks module options at bootstrap; the error names the option, the value and what is allowed. */
export function validateModuleOptions(options: RateLimitModuleOptions): void {
  const fail = (message: string) => new RateLimitConfigError(`RateLimitModule options: ${message}`);
  for (const key of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(key)) throw fail(`unknown option '${key}'; known options are ${[...KNOWN_OPTIONS].join(', ')}.`);
  }
  const { prefix, headers, onStoreError, storeTimeoutMs, mode, ipv6Subnet, memory, redis } = options;
  if (prefix !== undefined && (typeof prefix !== 'string' || !/^[A-Za-z0-9_.:-]{1,64}$/.test(prefix))) {
    throw fail(
      `prefix: ${describeValue(prefix)} must be 1-64 characters of A-Z a-z 0-9 _ . : - (no braces: they would change the cluster hash tag).`,
    );
  }
  oneOf('headers', headers, ['ietf', 'legacy', 'both', 'none']);
  oneOf('headerProfile', options.headerProfile, [...RATE_LIMIT_HEADER_PROFILES]);
  oneOf('onStoreError', onStoreError, ['fail-open', 'fail-closed', 'insurance']);
  const { insuranceShare, hotKeyShedding, storeErrorLogIntervalMs } = options;
  if (insuranceShare !== undefined && !(typeof insuranceShare === 'number' && insuranceShare > 0 && insuranceShare <= 1)) {
    throw fail(`insuranceShare: ${describeValue(insuranceShare)} must be a number in (0, 1], for example 1 / the number of instances.`);
  }
  const { nearLimitRatio } = options;
  if (nearLimitRatio !== undefined && !(typeof nearLimitRatio === 'number' && nearLimitRatio >= 0 && nearLimitRatio < 1)) {
    throw fail(`nearLimitRatio: ${describeValue(nearLimitRatio)} must be a number in [0, 1), for example 0.1 (10 % of the limit left).`);
  }
  if (
    hotKeyShedding !== undefined &&
    hotKeyShedding !== false &&
    !(
      typeof hotKeyShedding === 'object' &&
      (hotKeyShedding.maxKeys === undefined || (Number.isInteger(hotKeyShedding.maxKeys) && hotKeyShedding.maxKeys > 0))
    )
  ) {
    throw fail(`hotKeyShedding: ${describeValue(hotKeyShedding)} must be false or { maxKeys: <whole number ≥ 1> }.`);
  }
  if (storeErrorLogIntervalMs !== undefined && !(Number.isInteger(storeErrorLogIntervalMs) && storeErrorLogIntervalMs >= 0)) {
    throw fail(`storeErrorLogIntervalMs: ${describeValue(storeErrorLogIntervalMs)} must be a whole number of milliseconds ≥ 0.`);
  }
  if (options.maxWaiters !== undefined && !(Number.isInteger(options.maxWaiters) && options.maxWaiters >= 1)) {
    throw fail(
      `maxWaiters: ${describeValue(options.maxWaiters)} must be a whole number ≥ 1 (calls of one process waiting in acquire() on one key).`,
    );
  }
  oneOf('mode', mode, ['enforce', 'shadow']);
  if (options.batchDecisions !== undefined && typeof options.batchDecisions !== 'boolean') {
    throw fail(`batchDecisions: ${describeValue(options.batchDecisions)} must be true or false.`);
  }
  if (options.shadowHeaders !== undefined && typeof options.shadowHeaders !== 'boolean') {
    throw fail(`shadowHeaders: ${describeValue(options.shadowHeaders)} must be true or false.`);
  }
  for (const [field, value] of [
    ['storeTimeoutMs', storeTimeoutMs],
    ['userFunctionTimeoutMs', options.userFunctionTimeoutMs],
  ] as const) {
    if (value !== undefined && !(Number.isInteger(value) && value > 0)) {
      throw fail(`${field}: ${describeValue(value)} must be a whole number of milliseconds ≥ 1.`);
    }
  }
  if (ipv6Subnet !== undefined && !(Number.isInteger(ipv6Subnet) && ipv6Subnet >= 1 && ipv6Subnet <= 128)) {
    throw fail(`ipv6Subnet: ${describeValue(ipv6Subnet)} must be a prefix length from 1 to 128.`);
  }
  if (memory?.maxKeys !== undefined && !(Number.isInteger(memory.maxKeys) && memory.maxKeys >= 1)) {
    throw fail(`memory.maxKeys: ${describeValue(memory.maxKeys)} must be a whole number ≥ 1.`);
  }
  const { contexts, limitSubscriptions } = options;
  if (contexts !== undefined && !(Array.isArray(contexts) && contexts.length > 0 && contexts.every((c) => CONTEXT_TYPES.includes(c)))) {
    throw fail(
      `contexts: ${describeValue(contexts)} must be a non-empty array of ${CONTEXT_TYPES.map((c) => `'${c}'`).join(', ')} (registerGuard: false turns the guard off).`,
    );
  }
  if (limitSubscriptions !== undefined && typeof limitSubscriptions !== 'boolean') {
    throw fail(`limitSubscriptions: ${describeValue(limitSubscriptions)} must be true or false.`);
  }
  const { skipIf, ignoreUserAgents, errorMessage } = options;
  if (skipIf !== undefined && typeof skipIf !== 'function') {
    throw fail(`skipIf: ${describeValue(skipIf)} must be a function (context) => boolean | Promise<boolean>.`);
  }
  if (ignoreUserAgents instanceof RegExp) {
    throw fail(`ignoreUserAgents: ${String(ignoreUserAgents)} must be in an array: [${String(ignoreUserAgents)}].`);
  }
  if (ignoreUserAgents !== undefined && !(Array.isArray(ignoreUserAgents) && ignoreUserAgents.every((r) => r instanceof RegExp))) {
    throw fail(`ignoreUserAgents: ${describeValue(ignoreUserAgents)} must be an array of regular expressions, for example [/googlebot/i].`);
  }
  if (errorMessage !== undefined && typeof errorMessage !== 'string' && typeof errorMessage !== 'function') {
    throw fail(`errorMessage: ${describeValue(errorMessage)} must be a string or a function (context, decisions) => string.`);
  }
  oneOf('errorFormat', options.errorFormat, ['json', 'problem+json']);
  validateLoadShedding(options.loadShedding, fail);
  if (options.priority !== undefined && typeof options.priority !== 'function') {
    throw fail(`priority: ${describeValue(options.priority)} must be a function (context) => 'critical' | 'default' | 'sheddable'.`);
  }
  if (redis !== undefined && redis !== null && typeof redis !== 'string' && typeof redis !== 'object') {
    throw fail(
      `redis: ${describeValue(redis)} must be a redis:// URL, ioredis options, or a connected client: an ioredis Redis / Cluster, a node-redis client / cluster, or a Valkey GLIDE client.`,
    );
  }
  // ioredis reads any other string as host:port ("http://cache:6379" connects to a host named "http"), and
  // only rediss:// turns TLS on: the scheme must say which was meant.
  if (typeof redis === 'string' && !/^rediss?:\/\//i.test(redis)) {
    throw fail(
      `redis: ${describeValue(hidePassword(redis))} must be a URL starting with redis:// (or rediss:// for TLS), for example ` +
        `redis://localhost:6379; ioredis options (such as { path } for a Unix socket) or a client instance (ioredis, node-redis, Valkey GLIDE) work too.`,
    );
  }

  function oneOf(field: string, value: unknown, allowed: string[]): void {
    if (value !== undefined && !allowed.includes(value as string)) {
      throw fail(`${field}: ${describeValue(value)} must be one of ${allowed.map((a) => `'${a}'`).join(', ')}.`);
    }
  }
}

/** Checks `loadShedding`: thresholds above 0 (ratios at most 1) and an interval of whole ms ≥ 10. */
function validateLoadShedding(shedding: RateLimitModuleOptions['loadShedding'], fail: (message: string) => Error): void {
  if (shedding === undefined) return;
  if (typeof shedding !== 'object' || shedding === null) {
    throw fail(`loadShedding: ${describeValue(shedding)} must be an object such as { eventLoopDelayMs: 100 }.`);
  }
  const known = ['eventLoopDelayMs', 'eventLoopUtilization', 'heapUsedRatio', 'sampleIntervalMs'];
  for (const key of Object.keys(shedding)) {
    if (!known.includes(key)) throw fail(`loadShedding: unknown field '${key}'; known fields are ${known.join(', ')}.`);
  }
  const { eventLoopDelayMs, eventLoopUtilization, heapUsedRatio, sampleIntervalMs } = shedding;
  if (
    eventLoopDelayMs !== undefined &&
    !(typeof eventLoopDelayMs === 'number' && eventLoopDelayMs > 0 && Number.isFinite(eventLoopDelayMs))
  ) {
    throw fail(`loadShedding.eventLoopDelayMs: ${describeValue(eventLoopDelayMs)} must be a number of ms above 0, for example 100.`);
  }
  for (const [field, value] of [
    ['eventLoopUtilization', eventLoopUtilization],
    ['heapUsedRatio', heapUsedRatio],
  ] as const) {
    if (value !== undefined && !(typeof value === 'number' && value > 0 && value <= 1)) {
      throw fail(`loadShedding.${field}: ${describeValue(value)} must be a ratio in (0, 1], for example 0.9.`);
    }
  }
  if (sampleIntervalMs !== undefined && !(Number.isInteger(sampleIntervalMs) && sampleIntervalMs >= 10)) {
    throw fail(`loadShedding.sampleIntervalMs: ${describeValue(sampleIntervalMs)} must be a whole number of ms ≥ 10, for example 1000.`);
  }
}
