/**
 * The app under test for bench/http.ts, run as its own process: one variant on one adapter, twice (an
 * allow-all app and a reject-all app, on two ports, with separate key prefixes / throttler names so they
 * never share a counter). Prints `READY {"allow":port,"reject":port}` when both listen.
 *
 * Env: BENCH_VARIANT (see VARIANTS), BENCH_ADAPTER (fastify | express), BENCH_REDIS_URL,
 *      BENCH_HTTP_ALGORITHM, BENCH_HTTP_PEER_AUTOPIPELINE=1 (give the throttler's Redis client auto-pipelining too).
 */
import 'reflect-metadata';
import {
  Controller,
  Get,
  Injectable,
  Module,
  type CanActivate,
  type DynamicModule,
  type ExecutionContext,
  type INestApplication,
  type Provider,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { ThrottlerGuard, ThrottlerModule } from '@nestjs/throttler';
import { ThrottlerStorageRedisService } from '@nest-lab/throttler-storage-redis';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { NestExpressApplication } from '@nestjs/platform-express';
import fastifyRateLimit from '@fastify/rate-limit';
import { rateLimit as expressRateLimit } from 'express-rate-limit';
import { RedisStore as ExpressRedisStore, type RedisReply } from 'rate-limit-redis';
import { createClient } from 'redis';
import { Redis } from 'ioredis';
import * as lib from '../lib';
import { httpRejection } from '../lib/contexts/http.context';
import { HttpExchange, type HttpRequestLike, type HttpResponseLike } from '../lib/http/http-exchange';
import { rejectSoon } from '../lib/routes/route-responder';
import type { RateLimitAlgorithmName } from '../lib';

export const VARIANTS = [
  'bare',
  'noop-guard',
  'answer-only',
  'ours-memory',
  'ours-redis',
  'throttler-memory',
  'throttler-redis',
  'fastify-rl-memory',
  'fastify-rl-redis',
  'fastify-rl-redis-pipelined',
  'express-rl-memory',
  'express-rl-redis',
] as const;
export type HttpVariant = (typeof VARIANTS)[number];
export type LimitMode = 'allow' | 'reject';

/**
 * The framework's own limiters, each on its framework only, set up as its README shows: @fastify/rate-limit
 * (its in-memory store; Redis through an ioredis client as its example.js creates it, and auto-pipelined as
 * its example-auto-pipeline.mjs does) and express-rate-limit (its memory store; rate-limit-redis over a
 * node-redis client).
 */
const NATIVE: Partial<Record<HttpVariant, 'fastify' | 'express'>> = {
  'fastify-rl-memory': 'fastify',
  'fastify-rl-redis': 'fastify',
  'fastify-rl-redis-pipelined': 'fastify',
  'express-rl-memory': 'express',
  'express-rl-redis': 'express',
};

/** Whether a variant runs on an adapter: the framework-native limiters only on their own framework. */
export function runsOn(variant: HttpVariant, adapter: string): boolean {
  const only = NATIVE[variant];
  return only === undefined || only === adapter;
}

/** Allow-all: never reached during a run. Reject-all: one request, then 429s. */
const LIMIT: Record<LimitMode, number> = { allow: 1_000_000_000, reject: 1 };
const WINDOW_MS = 60_000;

/** What any global guard costs in Nest, whatever it does: the floor under every limiter's guard. */
@Injectable()
class NoopGuard implements CanActivate {
  async canActivate(): Promise<boolean> {
    return true;
  }
}

/**
 * Our guard's answer without its decision: the same `RateLimit-Policy` and `RateLimit` headers on every
 * response and, reject-all, the same 429 (`Retry-After`, `RateLimitExceededException`), nothing decided.
 * Ours minus this is what deciding costs; this minus `noop-guard` is what the answer costs any limiter.
 */
class AnswerOnlyGuard implements CanActivate {
  private remaining = LIMIT.allow;

  constructor(private readonly mode: LimitMode) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    // The guard's own exchange and 429 (`Retry-After`, the exception, rejected as it rejects), so only the
    // decision is missing.
    const exchange = new HttpExchange(context.getArgByIndex<HttpRequestLike>(0), context.getArgByIndex<HttpResponseLike>(1));
    if (this.mode === 'allow') {
      if (IETF_HEADERS) {
        exchange.setHeader('RateLimit-Policy', ALLOW_POLICY);
        exchange.setHeader('RateLimit', `"default";r=${--this.remaining};t=60`);
      }
      return true;
    }
    if (IETF_HEADERS) {
      exchange.setHeader('RateLimit-Policy', '"default";q=1;w=60');
      exchange.setHeader('RateLimit', '"default";r=0;t=60');
    }
    return rejectSoon(httpRejection(exchange, { message: 'Too Many Requests', retryAfter: 60, decisions: [] }));
  }
}

const ALLOW_POLICY = `"default";q=${LIMIT.allow};w=60`;
/** `answer-only` follows `BENCH_HTTP_HEADERS=none` (no rate-limit headers; a 429 still has `Retry-After`). */
const IETF_HEADERS = process.env.BENCH_HTTP_HEADERS !== 'none';

@Controller()
class BenchController {
  @Get()
  hello(): string {
    return 'ok';
  }
}

function rateLimitImports(variant: HttpVariant, mode: LimitMode, redisUrl: string): DynamicModule[] {
  const algorithm = (process.env.BENCH_HTTP_ALGORITHM ?? 'fixed-window') as RateLimitAlgorithmName;
  const limit = LIMIT[mode];
  switch (variant) {
    case 'bare':
    case 'noop-guard':
    case 'answer-only':
    case 'fastify-rl-memory':
    case 'fastify-rl-redis':
    case 'fastify-rl-redis-pipelined':
    case 'express-rl-memory':
    case 'express-rl-redis':
      return [];
    case 'ours-memory':
    case 'ours-redis':
      return [
        lib.RateLimitModule.forRoot({
          ...(variant === 'ours-redis' ? { redis: redisUrl } : {}),
          prefix: `rl-${mode}`,
          ...(process.env.BENCH_HTTP_HEADERS ? { headers: process.env.BENCH_HTTP_HEADERS as lib.RateLimitHeadersMode } : {}),
          defaultPolicy: { algorithm, limit, window: WINDOW_MS },
        }),
      ];
    case 'throttler-memory':
      return [ThrottlerModule.forRoot([{ name: mode, ttl: WINDOW_MS, limit }])];
    case 'throttler-redis': {
      // A URL, as its README shows: the storage then owns (and closes) its client.
      const storage = new ThrottlerStorageRedisService(
        redisUrl,
        process.env.BENCH_HTTP_PEER_AUTOPIPELINE === '1' ? { enableAutoPipelining: true } : {},
      );
      return [ThrottlerModule.forRoot({ throttlers: [{ name: mode, ttl: WINDOW_MS, limit }], storage })];
    }
  }
}

function appModule(variant: HttpVariant, mode: LimitMode, redisUrl: string): Type {
  const guards: Partial<Record<HttpVariant, Provider>> = {
    'noop-guard': { provide: APP_GUARD, useClass: NoopGuard },
    'answer-only': { provide: APP_GUARD, useFactory: () => new AnswerOnlyGuard(mode) },
    'throttler-memory': { provide: APP_GUARD, useClass: ThrottlerGuard },
    'throttler-redis': { provide: APP_GUARD, useClass: ThrottlerGuard },
  };
  const providers: Provider[] = guards[variant] ? [guards[variant]] : [];
  @Module({ imports: rateLimitImports(variant, mode, redisUrl), controllers: [BenchController], providers })
  class BenchAppModule {}
  return BenchAppModule;
}

async function listen(
  variant: HttpVariant,
  adapter: string,
  mode: LimitMode,
  redisUrl: string,
): Promise<{ app: INestApplication; port: number }> {
  const module = appModule(variant, mode, redisUrl);
  const app =
    adapter === 'fastify'
      ? await NestFactory.create<NestFastifyApplication>(module, new FastifyAdapter(), { logger: false })
      : await NestFactory.create<NestExpressApplication>(module, { logger: false });
  await useNativeLimiter(app, variant, mode, redisUrl);
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  return { app, port: address.port };
}

/** Registers a framework-native limiter (before `listen`, so it sees every route), as its README does. */
async function useNativeLimiter(app: INestApplication, variant: HttpVariant, mode: LimitMode, redisUrl: string): Promise<void> {
  const limit = LIMIT[mode];
  switch (variant) {
    case 'fastify-rl-memory':
    case 'fastify-rl-redis':
    case 'fastify-rl-redis-pipelined': {
      const redis =
        variant === 'fastify-rl-memory'
          ? undefined
          : new Redis(redisUrl, {
              connectTimeout: 500,
              maxRetriesPerRequest: 1,
              ...(variant === 'fastify-rl-redis-pipelined' ? { enableAutoPipelining: true } : {}),
            });
      await (app as NestFastifyApplication).register(fastifyRateLimit, {
        max: limit,
        timeWindow: WINDOW_MS,
        nameSpace: `fastify-rl-${mode}-`,
        ...(redis ? { redis } : {}),
      });
      return;
    }
    case 'express-rl-memory':
    case 'express-rl-redis': {
      const client = variant === 'express-rl-redis' ? await createClient({ url: redisUrl }).connect() : undefined;
      (app as NestExpressApplication).use(
        expressRateLimit({
          windowMs: WINDOW_MS,
          limit,
          standardHeaders: 'draft-8',
          legacyHeaders: false,
          ...(client
            ? {
                store: new ExpressRedisStore({
                  prefix: `erl-${mode}:`,
                  sendCommand: (...args: string[]) => client.sendCommand(args) as Promise<RedisReply>,
                }),
              }
            : {}),
        }),
      );
      return;
    }
    default:
      return;
  }
}

async function main(): Promise<void> {
  const variant = process.env.BENCH_VARIANT as HttpVariant;
  const adapter = process.env.BENCH_ADAPTER ?? 'fastify';
  const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  if (!VARIANTS.includes(variant)) throw new Error(`BENCH_VARIANT must be one of ${VARIANTS.join(', ')}`);
  if (!runsOn(variant, adapter)) throw new Error(`BENCH_VARIANT=${variant} runs on ${NATIVE[variant]} only, not on ${adapter}`);
  const allow = await listen(variant, adapter, 'allow', redisUrl);
  const reject = await listen(variant, adapter, 'reject', redisUrl);
  process.stdout.write(`READY ${JSON.stringify({ allow: allow.port, reject: reject.port })}\n`);
  // bench/http.ts asks for this process's CPU time around each load, to report CPU per request.
  process.on('message', () => {
    const { user, system } = process.cpuUsage();
    process.send?.({ cpuUs: user + system, kernelUs: system });
  });
  const stop = async () => {
    await Promise.allSettled([allow.app.close(), reject.app.close()]);
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error);
    process.exit(1);
  });
}
