/**
 * docs/outbound.md › "When the partner says wait", checked: the example's `QuotesService` (its code below, the
 * partner's URL pointing at a stand-in; the test first checks the guide's `quote()` is this one, word for word)
 * returns a quote when the partner answers 200, and when the partner answers 429 with `Retry-After: 2` it throws
 * a 503 saying how long to wait instead of passing the partner's error body on as a quote; the pause reaches
 * the next call, which is refused without reaching the partner (maxWaitMs below the pause).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Injectable, ServiceUnavailableException } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { RateLimitModule, RateLimitOutbound, RateLimitWaitError, pauseAskedMs, type RateLimitPolicy } from '../../lib';

let partnerUrl = '';

const partnerPolicy: RateLimitPolicy = { algorithm: 'gcra', limit: 5, window: '1s', burst: 1, scope: 'partner-api' };

@Injectable()
class QuotesService {
  private readonly partnerFetch: typeof fetch;

  constructor(outbound: RateLimitOutbound) {
    this.partnerFetch = outbound.wrapFetch(partnerPolicy, 'partner-api', fetch, { maxWaitMs: 500 });
  }

  async quote(id: string): Promise<unknown> {
    const res = await this.partnerFetch(`${partnerUrl}/quotes/${id}`); // waits its turn; a 429 pauses everyone
    if (!res.ok) {
      // A 429 (or any other failure) is no quote: its body is the partner's error, not data to pass on. The
      // pause it asked for already holds every instance's calls; tell the caller when to come back.
      await res.body?.cancel();
      const waitS = Math.ceil(pauseAskedMs(res, 86_400_000) / 1000); // Retry-After or RateLimit, as wrapFetch read it
      throw new ServiceUnavailableException(
        res.status === 429 ? `The partner asks us to wait ${waitS} s; try again then.` : `The partner answered ${res.status}.`,
      );
    }
    return res.json();
  }
}

/** The body of `quote()` in `source`, from its `const res` line to its `return`. */
function quoteBody(source: string): string {
  const start = source.indexOf('    const res = await this.partnerFetch(');
  const end = source.indexOf('    return res.json();', start);
  return source
    .slice(start, end)
    .replace(/this\.partnerFetch\([^;]*;/, 'this.partnerFetch(URL);')
    .trim();
}

let partner: Server;
let answers: Array<{ status: number; headers: Record<string, string>; body: string }> = [];
let calls = 0;

beforeAll(async () => {
  partner = createServer((_req, res) => {
    calls++;
    const answer = answers.shift() ?? { status: 200, headers: {}, body: '{}' };
    res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(answer.body);
  });
  await new Promise<void>((resolve) => partner.listen(0, '127.0.0.1', resolve));
  partnerUrl = `http://127.0.0.1:${(partner.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => partner.close(() => resolve())));

it("is the guide's code", () => {
  const guide = readFileSync(join(__dirname, '..', '..', 'docs', 'outbound.md'), 'utf8');
  expect(quoteBody(guide)).toBe(quoteBody(readFileSync(__filename, 'utf8')));
});

it("a quote on 200; on the partner's 429, a 503 naming the wait, and the next call held by the pause", async () => {
  const moduleRef = await Test.createTestingModule({ imports: [RateLimitModule.forRoot()], providers: [QuotesService] }).compile();
  await moduleRef.init();
  try {
    const quotes = moduleRef.get(QuotesService);
    answers = [{ status: 200, headers: {}, body: '{"id":"1","price":100}' }];
    expect(await quotes.quote('1')).toEqual({ id: '1', price: 100 });
    answers = [{ status: 429, headers: { 'retry-after': '2' }, body: '{"error":"slow down"}' }];
    const failure = await quotes.quote('2').catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ServiceUnavailableException);
    expect((failure as ServiceUnavailableException).message).toBe('The partner asks us to wait 2 s; try again then.');
    // The pause (2 s) ends after maxWaitMs (500 ms): the next call is refused at once, the partner not called.
    const before = calls;
    await expect(quotes.quote('3')).rejects.toBeInstanceOf(RateLimitWaitError);
    expect(calls).toBe(before);
  } finally {
    await moduleRef.close();
  }
});
