import 'reflect-metadata';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ExecutionContextHost } from '@nestjs/core/internal';
import { RpcException } from '@nestjs/microservices';
import { WsException } from '@nestjs/websockets';
import {
  RateLimitConfigError,
  RateLimitExceededException,
  RateLimitStoreUnavailableException,
  type RateLimitModuleOptions,
} from '../../lib';
import { RateLimitContexts } from '../../lib/contexts/create-context';
import { GraphqlRateLimitContext } from '../../lib/contexts/graphql.context';
import { HttpRateLimitContext } from '../../lib/contexts/http.context';
import { RpcRateLimitContext } from '../../lib/contexts/rpc.context';
import { WsRateLimitContext } from '../../lib/contexts/ws.context';
import { headerProfile } from '../../lib/http/header-profiles';
import { IpTrackers, resolveTracker } from '../../lib/http/tracker';
import { validateModuleOptions } from '../../lib/policy/validate-options';

class MathController {
  sum() {}
}

const ips = new IpTrackers(64);

function context(type: string, args: unknown[]): ExecutionContextHost {
  const host = new ExecutionContextHost(args, MathController, MathController.prototype.sum);
  host.setType(type);
  return host;
}

/** An Express-like response that records the headers set on it. */
function expressResponse() {
  const headers: Record<string, string> = {};
  return { headers, setHeader: (name: string, value: string) => void (headers[name] = value) };
}

const rejection = { message: 'Too Many Requests', retryAfter: 7, decisions: [] };

describe('HTTP context', () => {
  it('tracks req.ip, grouping IPv6 by the subnet, and sets Retry-After on a rejection', () => {
    const res = expressResponse();
    const call = new HttpRateLimitContext(context('http', [{ ip: '2001:db8:1:2:3:4:5:6', headers: {} }, res]));
    expect(call.defaultTracker(ips)).toBe('ip:2001:db8:1:2::/64');
    const error = call.rejected(rejection);
    expect(error).toBeInstanceOf(RateLimitExceededException);
    expect(res.headers).toEqual({ 'Retry-After': '7' });
  });
});

describe('GraphQL context', () => {
  const info = (operation: string) => ({ operation: { operation } });

  it('reads the Express request from { req } and writes headers on req.res', () => {
    const res = expressResponse();
    const req = { ip: '::ffff:10.0.0.9', headers: {}, user: { id: 7 }, res };
    const call = new GraphqlRateLimitContext(context('graphql', [{}, {}, { req }, info('query')]));
    expect(call.defaultTracker(ips)).toBe('ip:10.0.0.9');
    expect(call.user).toEqual({ id: 7 });
    call.setHeader('RateLimit', '"default";r=1;t=1');
    expect(call.rejected(rejection)).toBeInstanceOf(RateLimitExceededException);
    expect(res.headers).toEqual({ RateLimit: '"default";r=1;t=1', 'Retry-After': '7' });
  });

  it('reads Mercurius { reply } (reply.request) and writes headers through reply.header, named lowercase as Fastify sends them', () => {
    const written: Array<[string, string]> = [];
    const reply = {
      raw: {},
      request: { ip: '10.0.0.1', headers: {} },
      header: (name: string, value: string) => written.push([name, value]),
    };
    const call = new GraphqlRateLimitContext(context('graphql', [{}, {}, { reply }, info('mutation')]));
    expect(call.defaultTracker(ips)).toBe('ip:10.0.0.1');
    call.setHeader('RateLimit', 'x');
    call.setHeader('RateLimit-Policy', 'y');
    expect(written).toEqual([
      ['ratelimit', 'x'],
      ['ratelimit-policy', 'y'],
    ]);
  });

  it('falls back to the socket peer, and sets no header when the context has no response', () => {
    const req = { headers: {}, socket: { remoteAddress: '10.0.0.2' } };
    const call = new GraphqlRateLimitContext(context('graphql', [{}, {}, { extra: { request: req } }, info('subscription')]));
    expect(call.defaultTracker(ips)).toBe('ip:10.0.0.2');
    // Nest's Apollo driver puts graphql-ws's connection context where the request would be.
    const nested = { req: { connectionParams: {}, extra: { request: { headers: {}, socket: { remoteAddress: '10.0.0.3' } } } } };
    expect(new GraphqlRateLimitContext(context('graphql', [{}, {}, nested, info('subscription')])).defaultTracker(ips)).toBe('ip:10.0.0.3');
    expect(() => call.setHeader('RateLimit', 'x')).not.toThrow();
    expect(call.rejected(rejection)).toBeInstanceOf(RateLimitExceededException);
    expect(new GraphqlRateLimitContext(context('graphql', [{}, {}, undefined, undefined])).defaultTracker(ips)).toBe('ip:unknown');
  });

  it('knows a subscription from its operation', () => {
    expect(GraphqlRateLimitContext.isSubscription(context('graphql', [{}, {}, {}, info('subscription')]))).toBe(true);
    expect(GraphqlRateLimitContext.isSubscription(context('graphql', [{}, {}, {}, info('query')]))).toBe(false);
  });

  it('claims each resolver call once, and two resolver calls of one request separately', () => {
    const gql = { req: { headers: {} } };
    const first = context('graphql', [{}, {}, gql, info('query')]);
    expect(new GraphqlRateLimitContext(first).claim()).toBe(true);
    expect(new GraphqlRateLimitContext(first).claim()).toBe(false);
    expect(new GraphqlRateLimitContext(context('graphql', [{}, {}, gql, info('query')])).claim()).toBe(true);
  });
});

describe('WebSocket context', () => {
  it('tracks the handshake address and reads the user from client.data.user, else client.user', () => {
    const call = new WsRateLimitContext(context('ws', [{ handshake: { address: '::ffff:127.0.0.1' }, data: { user: { id: 'ann' } } }, {}]));
    expect(call.defaultTracker(ips)).toBe('ip:127.0.0.1');
    expect(call.user).toEqual({ id: 'ann' });
    expect(new WsRateLimitContext(context('ws', [{ user: 'bob' }, {}])).user).toBe('bob');
    expect(new WsRateLimitContext(context('ws', [{}, {}])).defaultTracker(ips)).toBe('ip:unknown');
  });

  it('rejects with a WsException carrying status, statusCode, message and retryAfter', () => {
    const call = new WsRateLimitContext(context('ws', [{ handshake: { address: '127.0.0.1' } }, {}]));
    const limited = call.rejected(rejection) as WsException;
    expect(limited).toBeInstanceOf(WsException);
    expect(limited.getError()).toEqual({ status: 'error', statusCode: 429, message: 'Too Many Requests', retryAfter: 7 });
    const down = call.unavailable() as WsException;
    expect(down).toBeInstanceOf(WsException);
    expect(down.getError()).toEqual({ status: 'error', statusCode: 503, message: 'Rate limit store unavailable' });
  });
});

describe('RPC context', () => {
  const tcp = (pattern: string) => ({ getPattern: () => pattern });

  it('tracks the pattern, plus the userId, else the id, of the data', () => {
    const tracker = (data: unknown, transport: unknown = tcp('{"cmd":"sum"}')) =>
      new RpcRateLimitContext(context('rpc', [data, transport])).defaultTracker();
    expect(tracker([1, 2])).toBe('rpc:{"cmd":"sum"}');
    expect(tracker({ id: 42 })).toBe('rpc:{"cmd":"sum"}:id=42');
    expect(tracker({ id: 42, userId: 'ann' })).toBe('rpc:{"cmd":"sum"}:userId=ann');
    expect(tracker({ id: '', userId: null })).toBe('rpc:{"cmd":"sum"}');
    expect(tracker({ id: { nested: true } })).toBe('rpc:{"cmd":"sum"}');
    expect(tracker('text')).toBe('rpc:{"cmd":"sum"}');
  });

  it("reads the pattern from other transports' contexts, else names the handler", () => {
    const tracker = (transport: unknown) => new RpcRateLimitContext(context('rpc', [{}, transport])).defaultTracker();
    expect(tracker({ getSubject: () => 'orders.created' })).toBe('rpc:orders.created');
    expect(tracker({ getChannel: () => 'jobs' })).toBe('rpc:jobs');
    expect(tracker({ getTopic: () => 'events' })).toBe('rpc:events');
    expect(tracker({ getMap: () => ({}) })).toBe('rpc:MathController.sum');
    expect(tracker(undefined)).toBe('rpc:MathController.sum');
  });

  it("uses the default tracker for 'ip' and 'user', and a by function's value in the by: namespace", async () => {
    const host = context('rpc', [{ userId: 5 }, tcp('sum')]);
    const call = new RpcRateLimitContext(host);
    await expect(resolveTracker('ip', host, call, ips)).resolves.toBe('rpc:sum:userId=5');
    await expect(resolveTracker('user', host, call, ips)).resolves.toBe('rpc:sum:userId=5');
    await expect(resolveTracker(() => undefined, host, call, ips)).resolves.toBe('rpc:sum:userId=5');
    await expect(
      resolveTracker((ctx) => `tenant:${ctx.switchToRpc().getData<{ userId: number }>().userId}`, host, call, ips),
    ).resolves.toBe('by:tenant:5');
    await expect(resolveTracker(() => 'rpc:sum:userId=5', host, call, ips)).resolves.toBe('by:rpc:sum:userId=5');
  });

  it('rejects with an RpcException carrying statusCode, message and retryAfter', () => {
    const call = new RpcRateLimitContext(context('rpc', [{}, tcp('sum')]));
    const limited = call.rejected({ ...rejection, retryAfter: null }) as RpcException;
    expect(limited).toBeInstanceOf(RpcException);
    expect(limited.getError()).toEqual({ statusCode: 429, message: 'Too Many Requests', retryAfter: null });
    expect((call.unavailable() as RpcException).getError()).toEqual({ statusCode: 503, message: 'Rate limit store unavailable' });
    expect(call.unavailable()).not.toBeInstanceOf(RateLimitStoreUnavailableException);
  });
});

describe('RateLimitContexts', () => {
  it('limits the four kinds by default and only the listed ones otherwise', () => {
    const all = new RateLimitContexts({}, headerProfile());
    expect(['http', 'graphql', 'ws', 'rpc', 'other'].map((t) => all.limited(context(t, [])))).toEqual([
      'http',
      'graphql',
      'ws',
      'rpc',
      null,
    ]);
    const some = new RateLimitContexts({ contexts: ['graphql', 'rpc'] }, headerProfile());
    expect(['http', 'graphql', 'ws', 'rpc'].map((t) => some.limited(context(t, [])))).toEqual([null, 'graphql', null, 'rpc']);
  });
});

describe('module options contexts and limitSubscriptions', () => {
  it.each([
    [
      { contexts: [] },
      `contexts: [] must be a non-empty array of 'http', 'graphql', 'ws', 'rpc' (registerGuard: false turns the guard off).`,
    ],
    [
      { contexts: ['http', 'grpc'] },
      `contexts: ["http","grpc"] must be a non-empty array of 'http', 'graphql', 'ws', 'rpc' (registerGuard: false turns the guard off).`,
    ],
    [
      { contexts: 'http' },
      `contexts: "http" must be a non-empty array of 'http', 'graphql', 'ws', 'rpc' (registerGuard: false turns the guard off).`,
    ],
    [{ limitSubscriptions: 'yes' }, 'limitSubscriptions: "yes" must be true or false.'],
  ])('rejects %j at bootstrap, naming the field, the value and what is allowed', (options, message) => {
    expect(() => validateModuleOptions(options as unknown as RateLimitModuleOptions)).toThrow(
      new RateLimitConfigError(`RateLimitModule options: ${message}`),
    );
  });

  it('accepts any non-empty subset of the four kinds, and a boolean limitSubscriptions', () => {
    expect(() => validateModuleOptions({ contexts: ['rpc'], limitSubscriptions: true })).not.toThrow();
    expect(() => validateModuleOptions({ contexts: ['http', 'graphql', 'ws', 'rpc'], limitSubscriptions: false })).not.toThrow();
  });
});

describe('optional peers', () => {
  /** Every .ts file under lib/, with its path. */
  function sources(dir: string): Array<{ file: string; text: string }> {
    return readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .map((file) => ({ file, text: readFileSync(join(dir, file), 'utf8') }));
  }

  it('are never imported by lib/: only required lazily, by the adapter that needs them', () => {
    const lib = sources(join(__dirname, '..', '..', 'lib'));
    const peer = String.raw`(?:@nestjs\/(?:graphql|apollo|mercurius|websockets|microservices|platform-socket\.io)|graphql|@apollo\/[^'"]+|socket\.io)`;
    const loaded = new RegExp(String.raw`(?:from\s+|import\s*\(\s*|require\s*\(\s*)['"]${peer}['"]`);
    expect(lib.filter(({ text }) => loaded.test(text)).map(({ file }) => file)).toEqual([]);
    const named = lib.flatMap(({ file, text }) =>
      text
        .split('\n')
        .filter((line) => /['"]@nestjs\/(graphql|websockets|microservices)['"]/.test(line) && !line.trim().startsWith('*'))
        .map((line) => `${file}: ${line.trim()}`),
    );
    expect(named.sort()).toEqual([
      "contexts/rpc.context.ts: const RpcException = loadOptional<{ RpcException: TransportExceptionClass }>('@nestjs/microservices')?.RpcException;",
      "contexts/ws.context.ts: const WsException = loadOptional<{ WsException: TransportExceptionClass }>('@nestjs/websockets')?.WsException;",
    ]);
  });
});
