import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import { AppDeps, AppModule } from './app.module';
import { configureApp } from './app.setup';
import { PinoNestLogger } from './http/nest-logger';

/** The service's app, wired as in production: main.ts, the benchmark's server and the kill -9 test's server
 * all start from here (the in-process e2e harness uses Nest's testing module instead, to swap providers). */
export async function createApp(deps: AppDeps): Promise<NestExpressApplication> {
  const app = await NestFactory.create<NestExpressApplication>(AppModule.forRoot(deps), {
    logger: new PinoNestLogger(deps.log),
    bodyParser: false,
  });
  configureApp(app, deps.settings, deps.token);
  return app;
}
