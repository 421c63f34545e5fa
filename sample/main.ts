import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';

/** `npm start`: the sample app on PORT (default 3000), Redis from REDIS_URL or the in-memory store. */
async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule);
  app.enableShutdownHooks();
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port);
  // The module has logged which store it decides with (memory, or Redis from REDIS_URL).
  Logger.log(`listening on http://localhost:${port}; try: curl -i http://localhost:${port}/algorithms/gcra`, 'Sample');
}

void bootstrap();
