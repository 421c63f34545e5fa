import { Controller, Get } from '@nestjs/common';
import { RateLimit } from '../lib';

/** One route per algorithm, 5 requests per 10 seconds each (positional form), so you can watch them differ. */
@Controller('algorithms')
export class AlgorithmsController {
  @Get('fixed-window')
  @RateLimit('fixed-window', 5, '10s')
  fixedWindow() {
    return { algorithm: 'fixed-window' };
  }

  @Get('sliding-window')
  @RateLimit('sliding-window', 5, '10s')
  slidingWindow() {
    return { algorithm: 'sliding-window' };
  }

  @Get('sliding-log')
  @RateLimit('sliding-log', 5, '10s')
  slidingLog() {
    return { algorithm: 'sliding-log' };
  }

  @Get('token-bucket')
  @RateLimit('token-bucket', 5, '10s', { burst: 10 })
  tokenBucket() {
    return { algorithm: 'token-bucket' };
  }

  @Get('gcra')
  @RateLimit('gcra', 5, '10s')
  gcra() {
    return { algorithm: 'gcra' };
  }

  /** Requests are held and leave 2 s apart: fire several at once and watch the spacing. */
  @Get('leaky-bucket')
  @RateLimit('leaky-bucket', 5, '10s')
  leakyBucket() {
    return { algorithm: 'leaky-bucket', at: new Date().toISOString() };
  }

  /** At most 2 requests inside at once; each takes 2 s. */
  @Get('concurrency')
  @RateLimit('concurrency', 2, '30s')
  async concurrency() {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    return { algorithm: 'concurrency' };
  }

  /**
   * An adaptive limit on the requests in flight in this process, following their latency: each takes 2 s,
   * so a burst of 20 at once finds 10 slots (the initial limit) and gets 503 with Retry-After for the rest.
   */
  @Get('adaptive')
  @RateLimit({ algorithm: 'adaptive', limit: 100, adaptive: { strategy: 'gradient', min: 5, initial: 10 } })
  async adaptive() {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    return { algorithm: 'adaptive' };
  }
}
