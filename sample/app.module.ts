import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import { Module } from '@nestjs/common';
import { GraphQLModule } from '@nestjs/graphql';
import { RateLimitModule } from '../lib';
import { RateLimitOpenTelemetryModule } from '../lib/opentelemetry';
import { RateLimitPrometheusModule } from '../lib/prometheus';
import { AccountsController } from './accounts.controller';
import { AiController } from './ai.controller';
import { AlgorithmsController } from './algorithms.controller';
import { ApiController } from './api.controller';
import { CatalogController } from './catalog.controller';
import { ChatGateway } from './chat.gateway';
import { MetricsController } from './metrics.controller';
import { ModerationController } from './moderation.controller';
import { PartnerController } from './partner.controller';
import { QuotesResolver } from './quotes.resolver';
import { ReportsController } from './reports.controller';
import { TenantsController } from './tenants.controller';

/**
 * The sample app. Options come from a factory, as they would from a ConfigService: Redis when REDIS_URL
 * is set, the in-process memory store otherwise.
 */
@Module({
  imports: [
    RateLimitModule.forRootAsync({
      useFactory: () => ({
        redis: process.env.REDIS_URL || undefined,
        prefix: 'sample',
        // Every route without its own @RateLimit (here: GET /).
        defaultPolicy: { algorithm: 'gcra', limit: 60, window: '1m' },
      }),
    }),
    // Counters per policy, store errors and decision latency in prom-client's global registry; GET /metrics.
    RateLimitPrometheusModule.forRoot(),
    // The same signals through OpenTelemetry (a no-op until an SDK is started before the app), plus span data.
    RateLimitOpenTelemetryModule.forRoot(),
    // POST /graphql; the schema is generated from QuotesResolver.
    GraphQLModule.forRoot<ApolloDriverConfig>({ driver: ApolloDriver, autoSchemaFile: true }),
  ],
  controllers: [
    ApiController,
    AlgorithmsController,
    AccountsController,
    PartnerController,
    MetricsController,
    ReportsController,
    AiController,
    ModerationController,
    CatalogController,
    TenantsController,
  ],
  providers: [QuotesResolver, ChatGateway],
})
export class AppModule {}
