import { ApolloDriver, type ApolloDriverConfig } from '@nestjs/apollo';
import type { DynamicModule } from '@nestjs/common';
import { GraphQLModule } from '@nestjs/graphql';
import type { AdapterName } from './harness';

/**
 * Apollo as the GraphQL specs run it: no GraphiQL, no stack traces in errors, and on Fastify (`adapter`) a
 * context that carries the reply, as an app wanting rate-limit headers there passes it (Apollo's default
 * context keeps only the request; leave `adapter` out to get that default).
 */
export function apolloModule(
  typeDefs: string,
  { adapter, ...config }: { adapter?: AdapterName } & Partial<ApolloDriverConfig> = {},
): DynamicModule {
  return GraphQLModule.forRoot<ApolloDriverConfig>({
    driver: ApolloDriver,
    typeDefs,
    graphiql: false,
    includeStacktraceInErrorResponses: false,
    ...(adapter === 'fastify' && { context: (req: unknown, reply: unknown) => ({ req, reply }) }),
    ...config,
  });
}
