import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { RateLimitTestClock, RateLimitTestingModule, expectRateLimited } from '../../lib/testing';
import request from 'supertest';
import { AppModule } from './testing-kit-app';

describe('GET /cats', () => {
  let app: NestFastifyApplication;
  let clock: RateLimitTestClock;

  beforeEach(async () => {
    clock = new RateLimitTestClock();
    const moduleRef = await RateLimitTestingModule.override(Test.createTestingModule({ imports: [AppModule] }), clock).compile();
    app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter());
    await app.init();
    await app.getHttpAdapter().getInstance().ready(); // supertest needs Fastify ready
  });
  afterEach(() => app.close());

  it('lets two requests a minute through', async () => {
    const server = app.getHttpServer();
    await request(server).get('/cats').expect(200);
    await request(server).get('/cats').expect(200);
    expectRateLimited(await request(server).get('/cats'), { retryAfter: 60, remaining: 0 });
    clock.advance('1m');
    await request(server).get('/cats').expect(200);
  });
});
