/**
 * Adaptive limits (`algorithm: 'adaptive'`) over HTTP on Express and Fastify: their `RateLimit-Policy` and
 * `RateLimit` members, the 503 with `Retry-After` beyond the limit (as problem details when they are on), a
 * slot freed whatever way the call ends, partitions by criticality, and their place beside a store policy.
 * No window completes here (fewer than 10 calls end per route), so each limit stays at its initial value.
 */
import { Controller, Get, Injectable, InternalServerErrorException, type INestApplication } from '@nestjs/common';
import type { Server } from 'node:http';
import request from 'supertest';
import { RateLimit, RateLimitModule, RateLimitPriority, type RateLimitModuleOptions } from '../../lib';
import { Gate } from '../support/gate';
import { ADAPTERS, bootApp, sleep } from './harness';

const TEMPORARY_REDUCED_CAPACITY = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';

@Injectable()
class Calls {
  failures = 0;
}

@Controller()
class AdaptiveController {
  constructor(
    private readonly gate: Gate,
    private readonly calls: Calls,
  ) {}

  @Get('three')
  @RateLimit({ algorithm: 'adaptive', limit: 100, adaptive: { initial: 3 } })
  async three() {
    await this.gate.pass();
    return 'done';
  }

  @Get('both')
  @RateLimit([
    { algorithm: 'fixed-window', limit: 2, window: '1m' },
    { algorithm: 'adaptive', name: 'capacity', limit: 50, adaptive: { strategy: 'gradient' } },
  ])
  both() {
    return 'done';
  }

  @Get('fails')
  @RateLimit({ algorithm: 'adaptive', limit: 10, adaptive: { strategy: 'aimd', initial: 1, min: 1 } })
  async fails() {
    if (this.calls.failures-- > 0) throw new InternalServerErrorException();
    await this.gate.pass();
    return 'done';
  }

  @Get('shared')
  @RateLimit({ algorithm: 'adaptive', limit: 10, adaptive: { initial: 2, partitions: { critical: 0.5 } } })
  async shared() {
    await this.gate.pass();
    return 'done';
  }

  @Get('batch')
  @RateLimitPriority('sheddable')
  @RateLimit({ algorithm: 'adaptive', limit: 10, adaptive: { initial: 2, partitions: { critical: 0.5 } } })
  async batch() {
    await this.gate.pass();
    return 'done';
  }
}

describe.each(ADAPTERS)('adaptive limits on %s', (adapter) => {
  let app: INestApplication;
  let gate: Gate;
  let calls: Calls;

  async function boot(options: RateLimitModuleOptions = {}): Promise<Server> {
    app = await bootApp({
      adapter,
      imports: [RateLimitModule.forRoot({ ...options })],
      controllers: [AdaptiveController],
      providers: [Gate, Calls],
    });
    gate = app.get(Gate);
    calls = app.get(Calls);
    return app.getHttpServer() as Server;
  }

  afterEach(async () => {
    gate?.release();
    await app?.close();
  });

  /** Starts `n` calls to `path` that wait at the gate; resolves once all are inside. */
  async function hold(server: Server, path: string, n: number, headers: Record<string, string> = {}) {
    const pending = Array.from({ length: n }, () =>
      request(server)
        .get(path)
        .set(headers)
        .then((r) => r),
    );
    while (gate.inside < n) await sleep(5);
    return pending;
  }

  it('states the limit and what is left of it, then answers 503 with Retry-After beyond it', async () => {
    const server = await boot();
    const held = await hold(server, '/three', 3);
    const refused = await request(server).get('/three');
    expect({ status: refused.status, retryAfter: refused.headers['retry-after'], body: refused.body as unknown }).toEqual({
      status: 503,
      retryAfter: '1',
      body: {
        statusCode: 503,
        message: 'Service Unavailable: this instance is at its capacity; retry later.',
        error: 'Service Unavailable',
        retryAfter: 1,
      },
    });
    expect(refused.headers['ratelimit-policy']).toBe('"adaptive";q=3;qu="concurrent-requests"');
    expect(refused.headers['ratelimit']).toBe('"adaptive";r=0');
    gate.release();
    const answers = await Promise.all(held);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    // Each was told what was left once it was admitted: 2, 1, then 0.
    expect(answers.map((a) => a.headers['ratelimit']).sort()).toEqual(['"adaptive";r=0', '"adaptive";r=1', '"adaptive";r=2']);
    gate.close();
    const [again] = await hold(server, '/three', 1);
    gate.release();
    expect((await again).headers['ratelimit']).toBe('"adaptive";r=2');
  });

  it("answers the 503 as problem details of the draft's temporary-reduced-capacity type", async () => {
    const server = await boot({ errorFormat: 'problem+json' });
    const held = await hold(server, '/three', 3);
    const refused = await request(server).get('/three');
    expect({ status: refused.status, type: refused.headers['content-type'], retryAfter: refused.headers['retry-after'] }).toEqual({
      status: 503,
      type: 'application/problem+json; charset=utf-8',
      retryAfter: '1',
    });
    expect(JSON.parse(refused.text)).toEqual({
      type: TEMPORARY_REDUCED_CAPACITY,
      title: 'Temporary Reduced Capacity',
      status: 503,
      detail: 'Service Unavailable: this instance is at its capacity; retry later.',
      'violated-policies': ['adaptive'],
    });
    gate.release();
    await Promise.all(held);
  });

  it('sits beside a store policy: both members are sent, and a 429 frees the adaptive slot', async () => {
    // The store policy counts in aligned 1-minute windows on the real clock: a window that ended mid-test would
    // admit again (a run on a busy box got a 200 at the 30th refusal). Start with at least 15 s of one left.
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 15_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
    const server = await boot();
    const first = await request(server).get('/both');
    expect(first.headers['ratelimit-policy']).toBe('"default";q=2;w=60, "capacity";q=20;qu="concurrent-requests"');
    expect(first.headers['ratelimit']).toMatch(/^"default";r=1;t=\d+, "capacity";r=19$/);
    await request(server).get('/both');
    const limited = await request(server).get('/both');
    expect(limited.status).toBe(429);
    // draft-11 lists only the violated policy on a 429.
    expect(limited.headers['ratelimit']).toMatch(/^"default";r=0;t=\d+$/);
    // 30 more refusals, past the adaptive limit of 20: had a refused call kept its slot, these would turn to 503.
    const statuses = [];
    for (let i = 0; i < 30; i++) statuses.push((await request(server).get('/both')).status);
    expect(statuses).toEqual(statuses.map(() => 429));
  });

  it('frees the slot of a call that failed (without measuring it)', async () => {
    const server = await boot();
    calls.failures = 2;
    expect((await request(server).get('/fails')).status).toBe(500);
    expect((await request(server).get('/fails')).status).toBe(500);
    // The limit is 1: after two failures a third call is still admitted, and a fourth is refused while it runs.
    const [held] = await hold(server, '/fails', 1);
    expect((await request(server).get('/fails')).status).toBe(503);
    gate.release();
    expect((await held).status).toBe(200);
  });

  it('holds a class to its share only while the whole limit is reached; the decorator wins over the priority option', async () => {
    const priority = (ctx: Parameters<NonNullable<RateLimitModuleOptions['priority']>>[0]) =>
      ctx.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-priority'] === 'critical' ? 'critical' : 'default';
    const server = await boot({ priority });
    const critical = { 'x-priority': 'critical' };
    // Two 'default' calls fill the limit of 2: 'default' has no share, 'critical' has ⌈2 · 0.5⌉ = 1.
    const held = await hold(server, '/shared', 2);
    expect((await request(server).get('/shared')).status).toBe(503);
    held.push(
      request(server)
        .get('/shared')
        .set(critical)
        .then((r) => r),
    );
    while (gate.inside < 3) await sleep(5);
    expect((await request(server).get('/shared').set(critical)).status).toBe(503);
    // '/batch' is @RateLimitPriority('sheddable'): the header does not make its calls critical.
    held.push(
      ...[0, 1].map(() =>
        request(server)
          .get('/batch')
          .then((r) => r),
      ),
    );
    while (gate.inside < 5) await sleep(5);
    expect((await request(server).get('/batch').set(critical)).status).toBe(503);
    gate.release();
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
  });
});
