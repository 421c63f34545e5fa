import { Controller, Get, Module } from '@nestjs/common';
import { RateLimit, RateLimitModule } from '../../lib';

/** The app of the README's testing example (its '../src/app.module'): a GET /cats limited to 2 a minute. */
@Controller('cats')
class CatsController {
  @Get()
  @RateLimit('fixed-window', 2, '1m')
  findAll(): string[] {
    return ['Tom'];
  }
}

/**
 * Redis as production configures it, at an address where nothing listens: the example passes only if the
 * testing kit keeps the app off Redis (on a Redis that is down, the default insurance decides on the real
 * clock, and the request after `clock.advance('1m')` would still be rejected).
 */
@Module({
  imports: [RateLimitModule.forRoot({ redis: 'redis://127.0.0.1:1' })],
  controllers: [CatsController],
})
export class AppModule {}
