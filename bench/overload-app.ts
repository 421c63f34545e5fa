/**
 * The app of bench/overload.ts, in its own process so it never shares an event loop with autocannon: Nest on
 * Fastify, whose `GET /query` waits on a simulated database, a semaphore of BENCH_OVERLOAD_DB_CAPACITY
 * permits each held BENCH_OVERLOAD_SERVICE_MS (queueing beyond, first come first served). With
 * BENCH_OVERLOAD_ADAPTIVE set, the route has an adaptive limit of that strategy; otherwise it has no policy.
 * `GET /stats` tells how many queries the database has running or waiting. Prints `READY <port>` once it
 * listens.
 */
import 'reflect-metadata';
import { Controller, Get, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { RateLimit, RateLimitModule, SkipRateLimit } from '../lib';
import type { RateLimitAdaptiveStrategy } from '../lib/interfaces/overload.interface';

const CAPACITY = Number(process.env.BENCH_OVERLOAD_DB_CAPACITY ?? 20);
const SERVICE_MS = Number(process.env.BENCH_OVERLOAD_SERVICE_MS ?? 50);
const STRATEGY = process.env.BENCH_OVERLOAD_ADAPTIVE as RateLimitAdaptiveStrategy | undefined;

/** A database that runs `capacity` queries at a time, each for `serviceMs`; the others wait their turn. */
@Injectable()
class SimulatedDatabase {
  private free = CAPACITY;
  private readonly waiting: Array<() => void> = [];

  /** Queries running or waiting for a permit. */
  get inflight(): number {
    return CAPACITY - this.free + this.waiting.length;
  }

  async query(): Promise<void> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    await new Promise((resolve) => setTimeout(resolve, SERVICE_MS));
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

@Controller()
class QueryController {
  constructor(private readonly db: SimulatedDatabase) {}

  @Get('query')
  async query(): Promise<string> {
    await this.db.query();
    return 'ok';
  }

  /** What the bench samples once a second. */
  @Get('stats')
  @SkipRateLimit()
  stats(): { inflight: number } {
    return { inflight: this.db.inflight };
  }
}

/** The same route under an adaptive limit whose ceiling is well above the database's capacity: it must find it. */
@Controller()
@RateLimit({ algorithm: 'adaptive', limit: 200, adaptive: { strategy: STRATEGY ?? 'vegas' } })
class LimitedQueryController extends QueryController {}

@Module({
  imports: [RateLimitModule.forRoot()],
  controllers: [STRATEGY ? LimitedQueryController : QueryController],
  providers: [SimulatedDatabase],
})
class OverloadAppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.create<NestFastifyApplication>(OverloadAppModule, new FastifyAdapter(), { logger: false });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as { port: number };
  process.stdout.write(`READY ${port}\n`);
  process.once('SIGTERM', () => void app.close().then(() => process.exit(0)));
}

void main();
