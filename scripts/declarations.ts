/**
 * Part of `npm run build`: writes `dist/ts5.3/`, a copy of the declarations whose imports of packages carry
 * `with { 'resolution-mode': 'import' }`, for TypeScript 5.3 and later (package.json "exports" picks it with a
 * `types@>=5.3` condition).
 *
 * Why: the package is CommonJS, and Nest 12 ships ES modules only. Under `moduleResolution: node16`, a
 * CommonJS declaration that imports '@nestjs/common' from an ES-module-only package is an error (TS1479 /
 * TS1541) unless the import says to resolve it as an ES module import. TypeScript before 5.3 cannot parse that
 * attribute, so it keeps reading the plain declarations next to the JavaScript, which serve Nest 10 and 11.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

const DIST = join(__dirname, '..', 'dist');
const OUT = join(DIST, 'ts5.3');

/** A static import or re-export of a package (not a relative path), as tsc writes it in a declaration. */
const PACKAGE_IMPORT = /^(import|export) (type )?(\{[^}]*\}|\* as \w+) from '([^.'][^']*)';$/gm;

function declarations(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return path === OUT ? [] : declarations(path);
    return entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The declaration with every package import type-only and resolved as an ES module import. */
export function withImportResolution(source: string, file: string): string {
  const rewritten = source.replace(PACKAGE_IMPORT, (_line, keyword: string, _type, names: string, from: string) => {
    const bare = names.replace(/\btype /g, '');
    return `${keyword} type ${bare} from '${from}' with { 'resolution-mode': 'import' };`;
  });
  // Anything else that names a package (an inline import("…") type, a multi-line import) would be left as
  // it was and fail under node16 only in users' builds: fail the build here instead.
  const missed = rewritten
    .split('\n')
    .filter(
      (line) =>
        (/^(import|export)\b.*\bfrom\s*['"][^.]/.test(line) || /\bimport\(\s*['"][^.]/.test(line)) && !line.includes("'resolution-mode'"),
    );
  if (missed.length > 0) throw new Error(`${file}: cannot rewrite these package imports for dist/ts5.3:\n${missed.join('\n')}`);
  return rewritten;
}

function main(): void {
  rmSync(OUT, { recursive: true, force: true });
  const files = declarations(DIST);
  for (const file of files) {
    const target = join(OUT, relative(DIST, file));
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, withImportResolution(readFileSync(file, 'utf8'), relative(DIST, file)));
  }
  // stderr: `npm pack --json` runs this through prepack, and its stdout must stay JSON.
  process.stderr.write(`dist/ts5.3: ${files.length} declarations with ES module import resolution\n`);
}

if (require.main === module) main();
