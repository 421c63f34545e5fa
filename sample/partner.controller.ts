import { Controller, Get, Param, ParseIntPipe, Query } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { AddressInfo } from 'node:net';
import { RateLimit, RateLimitOutbound, type RateLimitPolicy } from '../lib';

/**
 * The partner's quota, as their docs state it: 5 calls per second for all of us together, one every 200 ms.
 * Every instance of this app throttles through the same store, so N workers together stay under it.
 */
const PARTNER_QUOTA: RateLimitPolicy = { algorithm: 'gcra', limit: 5, window: '1s', burst: 1, scope: 'partner-api' };

@Controller()
export class PartnerController {
  /**
   * `fetch`, waiting for its turn (at most 10 s) instead of collecting 429s; and when the partner says to wait
   * anyway (`Retry-After`, or `RateLimit` with `r=0`), every instance's calls pause until then.
   */
  private readonly partnerFetch: (url: string) => Promise<Response>;

  constructor(
    outbound: RateLimitOutbound,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.partnerFetch = outbound.wrapFetch(PARTNER_QUOTA, 'partner-api', (url: string) => fetch(url), { maxWaitMs: 10_000 });
  }

  /**
   * A stand-in for someone else's API. It documents 5 calls per second, but shares that quota with its other
   * clients and lets us make 3 per second: beyond that it answers 429 with `Retry-After` (and `RateLimit`).
   */
  @Get('partner/quotes/:id')
  @RateLimit({ algorithm: 'fixed-window', limit: 3, window: '1s', by: () => 'partner-clients' })
  quote(@Param('id', ParseIntPipe) id: number) {
    return { id, price: 100 + id };
  }

  /**
   * Fetches `n` quotes (at most 20) from the partner: calls 200 ms apart, as documented, until the partner's
   * third answer of a second says `RateLimit: "default";r=0;t=1`: that pauses every call until its window
   * ends, so the partner never has to answer 429 (~3 calls per second; `partnerRejections: 0`). A partner that
   * sends only `Retry-After` with its 429 pauses them the same way, and that call is made again (up to 3 times).
   * @example curl localhost:3000/outbound/quotes?n=10
   */
  @Get('outbound/quotes')
  async quotes(@Query('n', ParseIntPipe) n: number) {
    const started = Date.now();
    let partnerRejections = 0;
    const quotes = await Promise.all(
      Array.from({ length: Math.min(n, 20) }, async (_, id) => {
        let response = await this.partnerFetch(this.url(id));
        // The 429 has paused the key: a retry waits for the pause to end, then for its turn.
        for (let retries = 0; response.status === 429 && retries < 3; retries++) {
          partnerRejections++;
          await response.body?.cancel();
          response = await this.partnerFetch(this.url(id));
        }
        return response.json() as Promise<unknown>;
      }),
    );
    return { quotes, partnerRejections, tookMs: Date.now() - started };
  }

  private url(id: number): string {
    const { port } = this.adapterHost.httpAdapter.getHttpServer().address() as AddressInfo;
    return `http://127.0.0.1:${port}/partner/quotes/${id}`;
  }
}
