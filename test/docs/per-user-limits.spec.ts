/**
 * docs/policies.md › "Per-user limits and authentication", checked: `by: 'user'` counts per user only when the
 * auth guard has set `req.user` before RateLimitModule's global guard runs. An auth guard registered as an
 * `APP_GUARD` in the module the app boots, or in a module imported before RateLimitModule, runs first; the same
 * guard on the controller, or in a module imported after RateLimitModule, runs too late, and every caller is
 * counted per IP (the trap the guide warns of).
 */
import {
  Controller,
  Injectable,
  Module,
  Post,
  UnauthorizedException,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { RateLimit, RateLimitModule } from '../../lib';
import { ADAPTERS, initApp } from '../e2e/harness';

/** The guide's stand-in for authentication: `Bearer <id>` becomes `req.user.id`. */
@Injectable()
class AuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ headers: { authorization?: string }; user?: { id: string } }>();
    const id = /^Bearer (\w+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!id) throw new UnauthorizedException();
    req.user = { id };
    return true;
  }
}

/** One request per user an hour. */
const PER_USER = { algorithm: 'fixed-window', limit: 1, window: '1h', by: 'user' } as const;

@Controller('orders')
class OrdersController {
  @Post()
  @RateLimit(PER_USER)
  create() {
    return { created: true };
  }
}

@Controller('orders')
@UseGuards(AuthGuard)
class GuardedOrdersController {
  @Post()
  @RateLimit(PER_USER)
  create() {
    return { created: true };
  }
}

/** The guide's AppModule: the auth guard global, in the module the app boots. */
@Module({
  imports: [RateLimitModule.forRoot({})],
  controllers: [OrdersController],
  providers: [{ provide: APP_GUARD, useClass: AuthGuard }],
})
class AppModule {}

@Module({ providers: [{ provide: APP_GUARD, useClass: AuthGuard }] })
class AuthModule {}

@Module({ imports: [AuthModule, RateLimitModule.forRoot({})], controllers: [OrdersController] })
class AuthImportedFirst {}

@Module({ imports: [RateLimitModule.forRoot({})], controllers: [GuardedOrdersController] })
class AuthOnTheController {}

@Module({ imports: [RateLimitModule.forRoot({}), AuthModule], controllers: [OrdersController] })
class AuthImportedAfter {}

describe.each(ADAPTERS)('per-user limits behind authentication on %s', (adapter) => {
  let app: INestApplication | undefined;
  afterEach(() => app?.close());

  /** The statuses of Ann, Bob, then Ann again, all from one address. */
  async function annBobAnn(root: Type): Promise<number[]> {
    const moduleRef = await Test.createTestingModule({ imports: [root] }).compile();
    app = await initApp(moduleRef.createNestApplication.bind(moduleRef), adapter);
    const statuses: number[] = [];
    for (const user of ['ann', 'bob', 'ann']) {
      statuses.push((await request(app.getHttpServer()).post('/orders').set('authorization', `Bearer ${user}`)).status);
    }
    return statuses;
  }

  it("counts per user with the guide's AppModule (APP_GUARD in the module the app boots)", async () => {
    expect(await annBobAnn(AppModule)).toEqual([201, 201, 429]);
  });

  it('counts per user with the auth guard global in a module imported before RateLimitModule', async () => {
    expect(await annBobAnn(AuthImportedFirst)).toEqual([201, 201, 429]);
  });

  it('counts every caller per IP with the auth guard on the controller: it runs after the global guard', async () => {
    expect(await annBobAnn(AuthOnTheController)).toEqual([201, 429, 429]);
  });

  it('counts every caller per IP with the auth guard global in a module imported after RateLimitModule', async () => {
    expect(await annBobAnn(AuthImportedAfter)).toEqual([201, 429, 429]);
  });
});
