import { Controller, Get, Param, ParseIntPipe, Query } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { AddressInfo } from 'node:net';
import { RateLimit, RateLimiterService, type RateLimitPolicy } from '../lib';

/**
 * The partner's quota, as their docs state it: 5 calls per second for all of us together. Every instance
 * of this app throttles through the same store, so N workers together stay under it.
 */
const PARTNER_QUOTA: RateLimitPolicy = { algorithm: 'leaky-bucket', limit: 5, window: '1s', burst: 5, scope: 'partner-api' };

@Controller()
export class PartnerController {
  /** Calls the partner, waiting for its turn (at most 5 s) instead of collecting 429s. */
  private readonly callPartner: (id: number) => Promise<unknown>;

  constructor(
    limiter: RateLimiterService,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.callPartner = limiter.wrap(PARTNER_QUOTA, 'partner-api', (id: number) => this.fetchQuote(id), { maxWaitMs: 5_000 });
  }

  /** A stand-in for someone else's API that enforces 5 per second (it answers 429 beyond that). */
  @Get('partner/quotes/:id')
  @RateLimit({ algorithm: 'fixed-window', limit: 5, window: '1s', by: () => 'partner-clients' })
  quote(@Param('id', ParseIntPipe) id: number) {
    return { id, price: 100 + id };
  }

  /**
   * Fetches `n` quotes from the partner as fast as its quota allows: every call succeeds, spaced ~200 ms
   * apart by the leaky bucket, and the response says how long it took.
   * @example curl localhost:3000/outbound/quotes?n=10
   */
  @Get('outbound/quotes')
  async quotes(@Query('n', ParseIntPipe) n: number) {
    const started = Date.now();
    const quotes = await Promise.all(Array.from({ length: Math.min(n, 20) }, (_, i) => this.callPartner(i)));
    return { quotes, tookMs: Date.now() - started };
  }

  private async fetchQuote(id: number): Promise<unknown> {
    const { port } = this.adapterHost.httpAdapter.getHttpServer().address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}/partner/quotes/${id}`);
    return { status: response.status, body: await response.json() };
  }
}
