/**
 * An app process that closes while `acquire()` calls wait: boots a Nest app with RateLimitModule on Redis (a
 * URL, so the module owns its client), takes the only token, starts WAITS calls that must wait about 20 s,
 * closes the app after 100 ms and prints one JSON line: how long `app.close()` took, how each wait ended
 * (ms after close began, error name) and the time the close began. Nothing else runs in the process: once
 * it is done, only timers left behind can keep it alive, so the parent times its exit.
 * Env: REDIS_URL, PREFIX, WAITS.
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { RateLimitModule } from '../../lib/rate-limit.module';
import { RateLimiterService } from '../../lib/rate-limiter.service';
import type { RateLimitPolicy } from '../../lib/interfaces/policy.interface';

const PARTNER: RateLimitPolicy = { algorithm: 'token-bucket', limit: 1, window: '20s', name: 'partner' };

@Module({ imports: [RateLimitModule.forRoot({ redis: process.env.REDIS_URL, prefix: process.env.PREFIX })] })
class AppModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const limiter = app.get(RateLimiterService);
  await limiter.acquire(PARTNER, 'partner');
  let closeStarted = 0;
  const ended: Array<{ ms: number; outcome: string }> = [];
  const waits = Array.from({ length: Number(process.env.WAITS ?? 3) }, () =>
    // Served in turn, one token per 20 s: the third starts 60 s on, so each may wait 2 minutes.
    limiter.acquire(PARTNER, 'partner', { maxWaitMs: 120_000 }).then(
      (decision) =>
        ended.push({ ms: performance.now() - closeStarted, outcome: `granted${decision.reason ? ` (${decision.reason})` : ''}` }),
      (error: Error) => ended.push({ ms: performance.now() - closeStarted, outcome: error.name }),
    ),
  );
  await new Promise((resolve) => setTimeout(resolve, 100));
  const closedAt = Date.now();
  closeStarted = performance.now();
  await app.close();
  const closeMs = performance.now() - closeStarted;
  await Promise.all(waits);
  process.stdout.write(`${JSON.stringify({ closeMs, closedAt, ended })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${String((error as Error)?.stack ?? error)}\n`);
  process.exitCode = 1;
});
