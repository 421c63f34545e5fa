import { anchorOf, fencedBlocks, importedPackages, tscErrors } from './compile-snippets';

describe('compile-snippets: reading the docs', () => {
  it('finds fenced blocks with their language and fence line, indented ones (in a list item) without their indentation', () => {
    const doc = ['# Title', '', '```ts', 'const a = 1;', '```', '', '- item', '  ```typescript', '  const b = 2;', '  ```', '```', 'x', '```'];
    expect(fencedBlocks('doc.md', doc.join('\n'))).toEqual([
      { doc: 'doc.md', line: 3, lang: 'ts', code: 'const a = 1;\n', indent: 0 },
      { doc: 'doc.md', line: 8, lang: 'typescript', code: 'const b = 2;\n', indent: 2 },
      { doc: 'doc.md', line: 11, lang: '', code: 'x\n', indent: 0 },
    ]);
  });

  it("names the packages a block imports: scoped ones by scope and name, never Node's own or relative files", () => {
    const code = [
      "import 'reflect-metadata';",
      "import { Module } from '@nestjs/common';",
      "import type { Redis } from 'ioredis';",
      "import { RateLimitMetrics } from 'nestjs-redis-ratelimit/prometheus';",
      "import { readFileSync } from 'node:fs';",
      "import { join } from 'path';",
      "import { AppModule } from '../src/app.module';",
      "const lazy = import('@nestjs/testing');",
    ].join('\n');
    expect(importedPackages(code)).toEqual(['reflect-metadata', '@nestjs/common', 'ioredis', 'nestjs-redis-ratelimit', '@nestjs/testing']);
  });

  it("gives a heading GitHub's anchor", () => {
    expect(anchorOf('One hot key: quota slices')).toBe('one-hot-key-quota-slices');
    expect(anchorOf('Reserve, then settle')).toBe('reserve-then-settle');
    expect(anchorOf('Migrating from @nestjs/throttler')).toBe('migrating-from-nestjsthrottler');
    expect(anchorOf('Contexts: HTTP, GraphQL, WebSockets and microservices')).toBe('contexts-http-graphql-websockets-and-microservices');
  });

  it("reads tsc's errors, each with the lines that continue it", () => {
    const output = [
      "snippets/README/app.module.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.",
      '  Details of the mismatch.',
      'error TS5023: Unknown compiler option.',
    ].join('\n');
    expect(tscErrors(output)).toEqual([
      {
        file: 'snippets/README/app.module.ts',
        line: 12,
        column: 5,
        message: "TS2322: Type 'string' is not assignable to type 'number'.\n  Details of the mismatch.",
      },
      { file: '', line: 0, column: 0, message: 'TS5023: Unknown compiler option.' },
    ]);
  });
});
