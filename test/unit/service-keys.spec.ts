/**
 * Tracker namespaces: a `by` function's value V is the tracker `by:V`, beside the built-in `ip:<address>` and
 * `user:<id>`, so no value a request controls reaches a built-in tracker's counter. A `RateLimiterService`
 * key names one of them: `ip:` (normalised as the guard does), `user:`, `rpc:` and `by:` as written, a bare IP
 * address refused, anything else K as `by:K`. Exact on the memory store.
 */
import type { ExecutionContext } from '@nestjs/common';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { RateLimitConfigError } from '../../lib/errors/rate-limit-config.error';
import { IpTrackers, resolveTracker, serviceTracker, type TrackerSource } from '../../lib/http/tracker';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';
import { RateLimitEngine } from '../../lib/pipeline/rate-limit.engine';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import { MemoryStore } from '../../lib/stores/memory/memory.store';
import { compilePolicy } from '../../lib/policy/compile-policy';
import { trackerKeyPrefix } from '../../lib/shared/keys';

const BARE_IP = (ip: string) =>
  `key: "${ip}" is a bare IP address, which names no tracker: write 'ip:${ip}' for the client at that address, or 'by:${ip}' for a value your by function returns.`;

describe('serviceTracker: the tracker a service key names', () => {
  it.each([
    ['acme', 'by:acme'],
    ['42', 'by:42'],
    ['by:acme', 'by:acme'],
    ['by:ip:127.0.0.1', 'by:ip:127.0.0.1'],
    ['by:127.0.0.1', 'by:127.0.0.1'],
    ['by:by:x', 'by:by:x'],
    ['user:42', 'user:42'],
    ['user:ann:admin', 'user:ann:admin'],
    ['rpc:sum:userId=5', 'rpc:sum:userId=5'],
    ['ip:127.0.0.1', 'ip:127.0.0.1'],
    ['ip:::ffff:127.0.0.1', 'ip:127.0.0.1'],
    ['ip:::ffff:7f00:1', 'ip:127.0.0.1'],
    ['ip:2001:db8::1:2:3:4', 'ip:2001:db8:0:0::/64'],
    ['ip:2001:DB8:0000::ffff%eth0', 'ip:2001:db8:0:0::/64'],
    ['ip:2001:db8:0:0::/64', 'ip:2001:db8:0:0::/64'],
    ['ip:2001:db8::/64', 'ip:2001:db8:0:0::/64'],
    ['ip:unknown', 'ip:unknown'],
    // Only ip:, user:, rpc: and by: name a namespace; other prefixes are a by value's own text.
    ['tenant:7', 'by:tenant:7'],
    ['IP:127.0.0.1', 'by:IP:127.0.0.1'],
    ['ws:1', 'by:ws:1'],
    ['[::1]', 'by:[::1]'],
  ])('%j → %j', (key, tracker) => {
    expect(serviceTracker(key, 64)).toBe(tracker);
  });

  it('groups IPv6 as the module does (ipv6Subnet), and accepts only that group written as a network', () => {
    expect(serviceTracker('ip:2001:db8:1:2::1', 48)).toBe('ip:2001:db8:1::/48');
    expect(serviceTracker('ip:2001:db8:1::/48', 48)).toBe('ip:2001:db8:1::/48');
    expect(serviceTracker('ip:2001:db8::1', 128)).toBe('ip:2001:db8:0:0:0:0:0:1');
    // The same string as the guard's tracker of that address.
    for (const [address, subnet] of [
      ['2001:db8::1:2:3:4', 64],
      ['2001:db8:1:2::1', 48],
      ['2001:db8::1', 128],
      ['::ffff:10.0.0.1', 64],
      ['198.51.100.4', 64],
    ] as const) {
      expect(serviceTracker(`ip:${address}`, subnet)).toBe(new IpTrackers(subnet).of(address));
    }
  });

  it.each([
    ['127.0.0.1', BARE_IP('127.0.0.1')],
    ['::1', BARE_IP('::1')],
    ['2001:db8::1', BARE_IP('2001:db8::1')],
    ['fe80::1%eth0', BARE_IP('fe80::1%eth0')],
    ['::ffff:127.0.0.1', BARE_IP('::ffff:127.0.0.1')],
    [
      'ip:localhost',
      `key: "ip:localhost": "localhost" is not an IP address; write 'ip:' before an IPv4 or IPv6 address (such as 'ip:203.0.113.7'), or 'by:ip:localhost' for a value your by function returns.`,
    ],
    [
      'ip:',
      `key: "ip:": "" is not an IP address; write 'ip:' before an IPv4 or IPv6 address (such as 'ip:203.0.113.7'), or 'by:ip:' for a value your by function returns.`,
    ],
    [
      'ip:127.0.0.1/32',
      `key: "ip:127.0.0.1/32": the guard keys IPv6 clients by their /64 (ipv6Subnet) and IPv4 clients by their address; write the client's address (such as 'ip:127.0.0.1').`,
    ],
    [
      'ip:2001:db8::/48',
      `key: "ip:2001:db8::/48": the guard keys IPv6 clients by their /64 (ipv6Subnet) and IPv4 clients by their address; write the client's address (such as 'ip:2001:db8::').`,
    ],
    ['user:', `key: "user:" names the user: namespace but no value; write the value after 'user:' (such as 'user:42').`],
    ['by:', `key: "by:" names the by: namespace but no value; write the value after 'by:' (such as 'by:42').`],
    ['rpc:', `key: "rpc:" names the rpc: namespace but no value; write the value after 'rpc:' (such as 'rpc:42').`],
  ])('refuses %j, saying what to write', (key, message) => {
    let error: unknown;
    try {
      serviceTracker(key, 64);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(RateLimitConfigError);
    expect((error as Error).message).toBe(message);
  });

  it('refuses a /128 network when the module groups by /128 (its tracker is the address itself)', () => {
    expect(() => serviceTracker('ip:2001:db8::1/128', 128)).toThrow(
      "key: \"ip:2001:db8::1/128\": the guard keys IPv6 clients by their /128 (ipv6Subnet) and IPv4 clients by their address; write the client's address (such as 'ip:2001:db8::1').",
    );
  });
});

describe('resolveTracker: a by function value lives in the by: namespace', () => {
  const context = {} as ExecutionContext;
  const ips = new IpTrackers(64);
  const source: TrackerSource = { defaultTracker: (trackers) => trackers.of('203.0.113.7'), user: { id: 'ann' } };
  const resolve = (value: unknown) => resolveTracker(() => value as string, context, source, ips);

  it.each([
    ['acme', 'by:acme'],
    ['ip:127.0.0.1', 'by:ip:127.0.0.1'],
    ['user:ann', 'by:user:ann'],
    ['by:acme', 'by:by:acme'],
    ['127.0.0.1', 'by:127.0.0.1'],
    [42, 'by:42'],
    [undefined, 'ip:203.0.113.7'],
    [null, 'ip:203.0.113.7'],
    ['', 'ip:203.0.113.7'],
  ])('%j → %j', async (value, tracker) => {
    await expect(resolve(value)).resolves.toBe(tracker);
  });

  it("leaves the built-in trackers as they were: 'ip' → ip:<address>, 'user' → user:<id>", async () => {
    await expect(resolveTracker('ip', context, source, ips)).resolves.toBe('ip:203.0.113.7');
    await expect(resolveTracker(undefined, context, source, ips)).resolves.toBe('ip:203.0.113.7');
    await expect(resolveTracker('user', context, source, ips)).resolves.toBe('user:ann');
  });

  it('keys a by value apart from the built-in tracker it spells, and bounded whatever its length', async () => {
    expect(trackerKeyPrefix('rl', await resolve('ip:127.0.0.1'))).toBe('rl:{by%3Aip%3A127.0.0.1}:');
    expect(trackerKeyPrefix('rl', ips.of('127.0.0.1'))).toBe('rl:{ip%3A127.0.0.1}:');
    // Past 160 encoded characters the tracker is a SHA-256 digest in the key, as before the namespace.
    expect(trackerKeyPrefix('rl', await resolve(`ip:127.0.0.1${'x'.repeat(1_000_000)}`))).toMatch(/^rl:\{#[A-Za-z0-9_-]{43}\}:$/);
  });

  it('a by tracker is the same string as the service tracker of its value, and of by:<value>', async () => {
    for (const value of ['acme', 'tenant:7', 'x'.repeat(1_000), '{weird}\n😀']) {
      const tracker = await resolve(value);
      expect(serviceTracker(value, 64)).toBe(tracker);
      expect(serviceTracker(`by:${value}`, 64)).toBe(tracker);
    }
  });
});

describe('RateLimiterService keys on the memory store', () => {
  const registry = new RateLimitAlgorithmRegistry();
  const POLICY: RateLimitPolicy = { algorithm: 'fixed-window', limit: 3, window: '1h', name: 'p' };

  function setup() {
    const engine = new RateLimitEngine(new MemoryStore({ clock: () => 1_700_000_000_000 }));
    const limiter = new RateLimiterService(engine, registry, { prefix: 'x' });
    const compiled = compilePolicy(POLICY, registry, 'test', 'svc');
    /** What is left of POLICY's counter at the tracker's own keys, as the guard would key it. */
    const remainingAt = async (tracker: string) =>
      (await engine.decide(trackerKeyPrefix('x', tracker), [{ compiled, params: compiled.staticParams!, cost: 1 }], 'peek')).decisions[0]
        .remaining;
    return { limiter, remainingAt };
  }

  it('a plain key and its by: form reach one counter, the by: tracker of that value', async () => {
    const { limiter, remainingAt } = setup();
    expect((await limiter.consume(POLICY, 'acme')).remaining).toBe(2);
    expect((await limiter.consume(POLICY, 'by:acme')).remaining).toBe(1);
    expect(await remainingAt('by:acme')).toBe(1);
    expect(await remainingAt('acme')).toBe(3);
    expect((await limiter.peek(POLICY, 'user:acme')).remaining).toBe(3);
  });

  it('ip: keys are normalised to the guard tracker; a by value spelling one is its own counter', async () => {
    const { limiter, remainingAt } = setup();
    await limiter.consume(POLICY, 'ip:127.0.0.1');
    await limiter.consume(POLICY, 'ip:::ffff:127.0.0.1');
    await limiter.consume(POLICY, 'ip:2001:db8::1');
    await limiter.consume(POLICY, 'ip:2001:db8::ffff');
    expect(await remainingAt('ip:127.0.0.1')).toBe(1);
    expect(await remainingAt('ip:2001:db8:0:0::/64')).toBe(1);
    expect((await limiter.consume(POLICY, 'by:ip:127.0.0.1')).remaining).toBe(2);
    expect(await remainingAt('by:ip:127.0.0.1')).toBe(2);
    expect(await remainingAt('ip:127.0.0.1')).toBe(1);
  });

  it('one tracker decided on several policies in turn keeps a counter per policy', async () => {
    const { limiter, remainingAt } = setup();
    const other: RateLimitPolicy = { algorithm: 'gcra', limit: 5, window: '1h', name: 'q' };
    const third: RateLimitPolicy = { algorithm: 'fixed-window', limit: 4, window: '1h', name: 'r' };
    const seen: number[] = [];
    for (const policy of [POLICY, other, POLICY, POLICY, third, other, POLICY])
      seen.push((await limiter.consume(policy, 'acme')).remaining);
    expect(seen).toEqual([2, 4, 1, 0, 3, 3, 0]);
    expect(await remainingAt('by:acme')).toBe(0);
    expect((await limiter.peek(other, 'acme')).remaining).toBe(3);
    expect((await limiter.peek(third, 'acme')).remaining).toBe(3);
  });

  it('deny: a bare address is refused; ip: denies the client at that address, not a by value', async () => {
    const { limiter } = setup();
    const refused = await limiter.deny('127.0.0.1', '1h').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimitConfigError);
    expect((refused as Error).message).toBe(BARE_IP('127.0.0.1'));
    expect(await limiter.denied('ip:127.0.0.1')).toBeUndefined();
    await limiter.deny('ip:::ffff:127.0.0.1', '1h', 'abuse');
    expect(await limiter.denied('ip:127.0.0.1')).toMatchObject({ reason: 'abuse' });
    expect(await limiter.consume(POLICY, 'ip:127.0.0.1')).toMatchObject({ allowed: false, reason: 'blocked' });
    expect(await limiter.denied('by:ip:127.0.0.1')).toBeUndefined();
    expect((await limiter.consume(POLICY, 'by:ip:127.0.0.1')).allowed).toBe(true);
    await limiter.allow('ip:127.0.0.1');
    expect(await limiter.denied('ip:127.0.0.1')).toBeUndefined();
  });

  it('every method that takes a key refuses a bare IP address with the same message', async () => {
    const { limiter } = setup();
    const lease: RateLimitPolicy = { algorithm: 'concurrency', limit: 1, window: '1m', name: 'l' };
    const calls: Array<[string, () => unknown]> = [
      ['consume', () => limiter.consume(POLICY, '10.0.0.1')],
      ['consumeAll', () => limiter.consumeAll([POLICY], '10.0.0.1')],
      ['reserve', () => limiter.reserve(POLICY, '10.0.0.1')],
      ['peek', () => limiter.peek(POLICY, '10.0.0.1')],
      ['reset', () => limiter.reset(POLICY, '10.0.0.1')],
      ['refund', () => limiter.refund(POLICY, '10.0.0.1')],
      ['penalty', () => limiter.penalty(POLICY, '10.0.0.1')],
      ['block', () => limiter.block(POLICY, '10.0.0.1', '1m')],
      ['unblock', () => limiter.unblock(POLICY, '10.0.0.1')],
      ['deny', () => limiter.deny('10.0.0.1', '1m')],
      ['allow', () => limiter.allow('10.0.0.1')],
      ['denied', () => limiter.denied('10.0.0.1')],
      ['lease', () => limiter.lease(lease, '10.0.0.1')],
      ['acquire', () => limiter.acquire(POLICY, '10.0.0.1')],
      ['waiting', () => limiter.waiting(POLICY, '10.0.0.1')],
      ['pause', () => limiter.pause(POLICY, '10.0.0.1', '1s')],
      ['wrap', () => limiter.wrap(POLICY, '10.0.0.1', () => 1)()],
    ];
    for (const [method, call] of calls) {
      const error = await (async () => call())().catch((e: unknown) => e);
      expect([method, error instanceof RateLimitConfigError, (error as Error).message]).toEqual([method, true, BARE_IP('10.0.0.1')]);
    }
  });
});
