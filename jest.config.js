const swc = (syntax) => ['@swc/jest', {
  jsc: { parser: { syntax, decorators: true }, transform: { legacyDecorator: true, decoratorMetadata: true }, target: 'es2022' },
  module: { type: 'commonjs' },
}];
module.exports = {
  testEnvironment: 'node',
  transform: { '^.+\\.ts$': swc('typescript'), '^.+\\.m?js$': swc('ecmascript') },
  transformIgnorePatterns: ['/node_modules/(?!(@nestjs)/)'],
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
};
