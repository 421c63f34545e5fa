// Nest 12 ships ES modules only; jest runs CommonJS, so SWC compiles both our TypeScript and @nestjs/*.
const swc = (syntax) => [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax, decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  },
];

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': swc('typescript'), '^.+\\.m?js$': swc('ecmascript') },
  transformIgnorePatterns: ['/node_modules/(?!(@nestjs)/)'],
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  // The consumer apps' own specs (run there by the consumer test, against the packed library).
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/test/consumers/fixture/'],
  maxWorkers: 2,
  testTimeout: 30_000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
};
