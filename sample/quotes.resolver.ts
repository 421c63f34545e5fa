import { Query, Resolver } from '@nestjs/graphql';
import { RateLimit } from '../lib';

/**
 * GraphQL (Apollo on Express, POST /graphql): the global guard limits resolvers like routes, per field.
 * A 6th `{ quote }` within a minute answers `data.quote: null` with an error whose `extensions` are
 * `{ code: 'RATE_LIMITED', retryAfter }` (the wait in seconds); the RateLimit headers and `Retry-After` are on
 * the HTTP response (status 200, as GraphQL answers).
 */
@Resolver()
export class QuotesResolver {
  @Query(() => String, { nullable: true })
  @RateLimit('sliding-window', 5, '1m', { name: 'quote' })
  quote() {
    return 'Simplicity is prerequisite for reliability.';
  }

  /** No @RateLimit: the module's defaultPolicy (gcra, 60 per minute) applies, as to routes. */
  @Query(() => String, { nullable: true })
  author() {
    return 'Edsger W. Dijkstra';
  }
}
