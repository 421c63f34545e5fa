/**
 * Part of `npm run build`: writes `dist/ts5.3/`, declarations whose imports of packages carry
 * `with { 'resolution-mode': 'import' }`, for TypeScript 5.3 and later (package.json "exports" picks it with a
 * `types@>=5.3` condition).
 *
 * Why: the package is CommonJS, and Nest 12 ships ES modules only. Under `moduleResolution: node16`, a
 * CommonJS declaration that imports '@nestjs/common' from an ES-module-only package is an error (TS1479 /
 * TS1541) unless the import says to resolve it as an ES module import. TypeScript before 5.3 cannot read that
 * attribute (TS4125, "resolution-mode assertions are unstable"), so it keeps reading the plain declarations
 * next to the JavaScript, which serve Nest 10 and 11. One set cannot serve both, hence two.
 *
 * Only what differs, and only what TypeScript can reach, is copied: a declaration that imports a package, or
 * imports (at any depth) one that does, since a relative import cannot change with the TypeScript version; and of
 * those only what the entry points of "exports" reach (internal modules the public types never name are not
 * read through dist/ts5.3, so they need no copy). Declarations that reach no package read the same under every
 * TypeScript: the copies import them where they are in dist/ (`../…`), so they exist once.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, posix, relative, resolve, sep } from 'node:path';

const DIST = join(__dirname, '..', 'dist');
const OUT = join(DIST, 'ts5.3');

/** A static import or re-export of a package (not a relative path), as tsc writes it in a declaration. */
const PACKAGE_IMPORT = /^(import|export) (type )?(\{[^}]*\}|\* as \w+) from '([^.'][^']*)';$/gm;
/** Every module specifier of a declaration: `from '…'` and inline `import("…")` types. */
const SPECIFIER = /(\bfrom\s*|\bimport\(\s*)(['"])([^'"]+)\2/g;

function declarations(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return path === OUT ? [] : declarations(path);
    return entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The declaration file a relative specifier of `from` names, as TypeScript finds it. */
function resolveRelative(from: string, specifier: string): string {
  const base = resolve(dirname(from), specifier).replace(/\.js$/, '');
  const found = [`${base}.d.ts`, join(base, 'index.d.ts')].find((candidate) => existsSync(candidate));
  if (!found) throw new Error(`${relative(DIST, from)}: cannot resolve '${specifier}'`);
  return found;
}

/** The relative imports of each declaration, resolved, and whether it imports a package itself. */
function importGraph(sources: Map<string, string>): { imports: Map<string, string[]>; importsPackage: Set<string> } {
  const imports = new Map<string, string[]>();
  const importsPackage = new Set<string>();
  for (const [file, source] of sources) {
    const specifiers = [...source.matchAll(SPECIFIER)].map((match) => match[3]);
    if (specifiers.some((specifier) => !specifier.startsWith('.'))) importsPackage.add(file);
    const relativeOnes = specifiers.filter((specifier) => specifier.startsWith('.'));
    imports.set(
      file,
      relativeOnes.map((specifier) => resolveRelative(file, specifier)),
    );
  }
  return { imports, importsPackage };
}

/**
 * Which declarations go to dist/ts5.3: the entry points, and every declaration that reaches a package (imports
 * one, or imports a declaration that does) and that the entry points reach through such declarations.
 */
export function copiesFor(sources: Map<string, string>, entries: string[]): Set<string> {
  const { imports, importsPackage } = importGraph(sources);
  const reaching = new Set(importsPackage);
  for (let grew = true; grew;) {
    grew = false;
    for (const [file, targets] of imports) {
      if (!reaching.has(file) && targets.some((target) => reaching.has(target))) {
        reaching.add(file);
        grew = true;
      }
    }
  }
  const copies = new Set<string>();
  const pending = [...entries];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (copies.has(file)) continue;
    copies.add(file);
    pending.push(...(imports.get(file) ?? []).filter((target) => reaching.has(target)));
  }
  return copies;
}

/** The declarations package.json "exports" points TypeScript 5.3+ at (`types@>=5.3`), as their plain paths in dist/. */
function entryPoints(): string[] {
  const { exports } = JSON.parse(readFileSync(join(DIST, '..', 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  return Object.values(exports).flatMap((conditions) => {
    const target =
      typeof conditions === 'object' && conditions !== null ? (conditions as Record<string, unknown>)['types@>=5.3'] : undefined;
    if (typeof target !== 'string') return [];
    const plain = join(DIST, posix.relative('dist/ts5.3', posix.normalize(target)));
    if (!existsSync(plain)) throw new Error(`package.json "exports" names ${target}, but ${relative(DIST, plain)} was not built`);
    return [plain];
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

/** The copy of `file` (in dist/ts5.3) with its relative imports of declarations that are not copied pointing into dist/. */
function withSharedImports(source: string, file: string, copied: Set<string>): string {
  const copyDir = dirname(join(OUT, relative(DIST, file)));
  return source.replace(SPECIFIER, (whole, lead: string, quote: string, specifier: string) => {
    if (!specifier.startsWith('.') || copied.has(resolveRelative(file, specifier))) return whole;
    const shared = relative(copyDir, resolve(dirname(file), specifier))
      .split(sep)
      .join(posix.sep);
    return `${lead}${quote}${shared.startsWith('.') ? shared : `./${shared}`}${quote}`;
  });
}

function main(): void {
  rmSync(OUT, { recursive: true, force: true });
  const files = declarations(DIST);
  const sources = new Map(files.map((file) => [file, readFileSync(file, 'utf8')]));
  const copied = copiesFor(sources, entryPoints());
  for (const file of copied) {
    const target = join(OUT, relative(DIST, file));
    mkdirSync(dirname(target), { recursive: true });
    const source = withSharedImports(sources.get(file)!, file, copied);
    writeFileSync(target, withImportResolution(source, relative(DIST, file)));
  }
  // stderr: `npm pack --json` runs this through prepack, and its stdout must stay JSON.
  process.stderr.write(
    `dist/ts5.3: ${copied.size} of ${files.length} declarations, with ES module import resolution (the others reach no package, or are never read from there)\n`,
  );
}

if (require.main === module) main();
