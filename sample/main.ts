import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';

/** `npm start`: the sample app on PORT (default 3000), Redis from REDIS_URL or the in-memory store. */
async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule);
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port);
  const store = process.env.REDIS_URL ? `Redis at ${process.env.REDIS_URL}` : 'the in-memory store (set REDIS_URL to use Redis)';
  Logger.log(`listening on http://localhost:${port} with ${store}; try: curl -i http://localhost:${port}/algorithms/gcra`, 'Sample');
}

void bootstrap();
