/**
 * Docs that cannot rot: every TypeScript block (```ts or ```typescript) of README.md and docs/*.md compiles as a
 * user pastes it, against the package as users install it. `npm pack` builds the tarball (its prepack builds
 * dist/); one throwaway app installs it with every package the blocks import, at the versions this repository's
 * own tests run; then one tsc run (this repository's TypeScript) compiles every block as its own CommonJS module
 * with `strict`, `skipLibCheck: false`, `experimentalDecorators` and `emitDecoratorMetadata`. For each block that
 * fails it prints the file, the line of its fence and tsc's errors (at their line in the file); it exits 1 when
 * any block fails, or when a block of another language holds code of this package (TypeScript is labelled ts).
 *
 * A block whose first line is a comment naming a file, such as `// src/app.module.ts`, is written at that path
 * beside the other named blocks of its document, so a block may import another (`../src/app.module`); any other
 * block, and a block naming a file an earlier block of its document named already, stands alone. Links between
 * the documents are checked too: a relative link names a file that exists, and its `#anchor` a heading there.
 *
 * Run: `ts-node --transpile-only -P tsconfig.json test/docs/compile-snippets.ts` (needs the npm registry; about a
 * minute). DOCS_TARBALL=<file.tgz> compiles against a tarball packed already; DOCS_KEEP=1 keeps the app's folder.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { run, timed } from '../consumers/exec';

const ROOT = join(__dirname, '..', '..');
const PACKAGE = 'nestjs-redis-ratelimit';
/** Types every block may use without importing them: Node's globals, and jest's in a spec. */
const GLOBAL_TYPES = ['node', 'jest'];

/** One fenced block of a document. */
export interface Block {
  /** The document, relative to the repository: `README.md`, `docs/policies.md`. */
  doc: string;
  /** 1-based line of the opening fence. */
  line: number;
  lang: string;
  /** The block's text, without the indentation of its fence. */
  code: string;
  /** How many columns the fence is indented (a block inside a list item). */
  indent: number;
}

/** A block written into the app: where it sits, and the block. */
interface Snippet {
  block: Block;
  /** Relative to the app's folder. */
  file: string;
}

interface Failure {
  /** A block that does not compile, a link that leads nowhere, code in a block not labelled ts, or tsc itself. */
  kind: 'block' | 'link' | 'label' | 'tsc';
  /** `docs/policies.md:8` (a block: its fence), or a file of the app that is no block. */
  where: string;
  messages: string[];
}

/** The documents: README.md and every docs/*.md. */
function documents(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

/** Every fenced block of `text`, with its language (the fence's first word; '' when none). */
export function fencedBlocks(doc: string, text: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)(`{3,})\s*([\w+-]*)/.exec(lines[i]);
    if (!open) continue;
    const [, spaces, fence, lang] = open;
    const close = new RegExp(`^ *${fence}\\s*$`);
    let end = i + 1;
    while (end < lines.length && !close.test(lines[end])) end++;
    const body = lines.slice(i + 1, end).map((line) => (line.startsWith(spaces) ? line.slice(spaces.length) : line.trimStart()));
    blocks.push({ doc, line: i + 1, lang: lang.toLowerCase(), code: body.join('\n') + '\n', indent: spaces.length });
    i = end;
  }
  return blocks;
}

const isTypeScript = (block: Block): boolean => block.lang === 'ts' || block.lang === 'typescript';

/** Code of this package in a block that is not labelled TypeScript: what a relabelled ts block looks like. */
function mislabelled(block: Block): boolean {
  return !isTypeScript(block) && new RegExp(`from '${PACKAGE}|@RateLimit\\(|@SkipRateLimit\\(|RateLimitModule\\.`).test(block.code);
}

/** `// src/app.module.ts` on a block's first line: the file it is. */
function namedFile(block: Block): string | undefined {
  const named = /^\/\/ ((?:[\w.-]+\/)*[\w.-]+\.ts)\s*$/.exec(block.code.split('\n')[0]);
  return named && !named[1].split('/').includes('..') ? named[1] : undefined;
}

/**
 * Where each TypeScript block goes in the app: snippets/<document>/<the file it names>, or, for a block that
 * names none or one named already, snippets/<document>/L<fence line>/<the file it names, or snippet.ts>.
 */
function placeSnippets(blocks: Block[]): Snippet[] {
  const taken = new Set<string>();
  return blocks.filter(isTypeScript).map((block) => {
    const folder = join('snippets', block.doc.replace(/\.md$/, ''));
    const named = namedFile(block);
    const shared = named && join(folder, named);
    const file = shared && !taken.has(shared) ? shared : join(folder, `L${block.line}`, named ?? 'snippet.ts');
    taken.add(file);
    return { block, file };
  });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
export function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .trim()
    .replace(/\s/g, '-');
}

/** Relative links of the documents whose file is missing, or whose `#anchor` no heading of that file has. */
function brokenLinks(texts: Map<string, string>): Failure[] {
  const anchors = new Map<string, Set<string>>();
  const anchorsOf = (doc: string): Set<string> => {
    let found = anchors.get(doc);
    if (!found) {
      const text = texts.get(doc) ?? readFileSync(join(ROOT, doc), 'utf8');
      const outsideFences = text.replace(/^ *```[^]*?^ *```/gm, '');
      found = new Set([...outsideFences.matchAll(/^#{1,6} +(.+?) *$/gm)].map(([, heading]) => anchorOf(heading)));
      anchors.set(doc, found);
    }
    return found;
  };
  const failures: Failure[] = [];
  for (const [doc, text] of texts) {
    const lines = text.replace(/^ *```[^]*?^ *```/gm, (fence) => fence.replace(/[^\n]/g, ' ')).split('\n');
    lines.forEach((line, i) => {
      for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target)) continue;
        const [path, anchor] = target.split('#');
        const file = path ? relative(ROOT, resolve(ROOT, dirname(doc), path)) : doc;
        const problem = !existsSync(join(ROOT, file))
          ? `links to ${target}, but there is no ${file}`
          : anchor !== undefined && file.endsWith('.md') && !anchorsOf(file).has(anchor)
            ? `links to ${target}, but ${file} has no heading whose anchor is #${anchor}`
            : undefined;
        if (problem) failures.push({ kind: 'link', where: `${doc}:${i + 1}`, messages: [problem] });
      }
    });
  }
  return failures;
}

/** The package each bare import of `code` names (`@nestjs/common/x` → `@nestjs/common`); Node's own left out. */
export function importedPackages(code: string): string[] {
  const specifiers = [...code.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)'([^']+)'/g)].map(([, s]) => s);
  const packages = specifiers
    .filter((s) => !s.startsWith('.') && !s.startsWith('/') && !s.startsWith('node:') && !builtinModules.includes(s.split('/')[0]))
    .map((s) => s.split('/').slice(0, s.startsWith('@') ? 2 : 1).join('/'));
  return [...new Set(packages)];
}

/**
 * The peers an app installs to use the package's subpaths the blocks import (`nestjs-redis-ratelimit/prometheus`
 * needs prom-client): the peer dependencies that lib/<subpath>/ imports.
 */
function subpathPeers(snippets: Snippet[]): string[] {
  const peers = Object.keys(manifest(ROOT).peerDependencies ?? {});
  const subpaths = new Set(
    snippets.flatMap(({ block }) => [...block.code.matchAll(new RegExp(`'${PACKAGE}/([\\w-]+)'`, 'g'))].map(([, subpath]) => subpath)),
  );
  const sources = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
    );
  return [...subpaths]
    .filter((subpath) => existsSync(join(ROOT, 'lib', subpath)))
    .flatMap((subpath) => sources(join(ROOT, 'lib', subpath)).flatMap((file) => importedPackages(readFileSync(file, 'utf8'))))
    .filter((name) => peers.includes(name));
}

interface Manifest {
  version: string;
  peerDependencies?: Record<string, string>;
  types?: string;
  typings?: string;
  overrides?: Record<string, unknown>;
}

const manifest = (dir: string): Manifest => JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;

/**
 * The app's dependencies: the tarball, every package the blocks import and the global types, each at the version
 * installed in this repository (what its own tests run), with `@types/<name>` for a package without types of its
 * own, and the repository's `overrides` for those packages. A package this repository does not install is an error.
 */
function dependencies(snippets: Snippet[], tarball: string): { deps: Record<string, string>; overrides: Record<string, unknown> } {
  const imported = new Set(snippets.flatMap(({ block }) => importedPackages(block.code)));
  imported.delete(PACKAGE);
  for (const peer of subpathPeers(snippets)) imported.add(peer);
  const deps: Record<string, string> = { [PACKAGE]: `file:${tarball}` };
  const missing: string[] = [];
  const add = (name: string): Manifest | undefined => {
    const dir = join(ROOT, 'node_modules', name);
    if (!existsSync(join(dir, 'package.json'))) return undefined;
    const found = manifest(dir);
    deps[name] = found.version;
    return found;
  };
  for (const name of [...imported].sort()) {
    const found = add(name);
    if (!found) missing.push(name);
    else if (!found.types && !found.typings && !existsSync(join(ROOT, 'node_modules', name, 'index.d.ts'))) {
      add(`@types/${name.replace(/^@([^/]+)\//, '$1__')}`);
    }
  }
  for (const name of GLOBAL_TYPES) add(`@types/${name}`);
  if (missing.length > 0) {
    throw new Error(`the docs import ${missing.join(', ')}, which this repository does not install: add it to devDependencies`);
  }
  const overrides = Object.fromEntries(Object.entries(manifest(ROOT).overrides ?? {}).filter(([name]) => name in deps));
  return { deps, overrides };
}

/** The tsconfig of a Nest app, as strict as it gets: CommonJS, decorators with their metadata, every .d.ts checked. */
const TSCONFIG = {
  compilerOptions: {
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'ES2022',
    lib: ['ES2022'],
    strict: true,
    skipLibCheck: false,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    esModuleInterop: true,
    moduleDetection: 'force',
    types: GLOBAL_TYPES,
    noEmit: true,
  },
  include: ['snippets/**/*.ts'],
};

/** `npm pack` of this repository into `into`; the tarball's path. */
async function pack(into: string): Promise<string> {
  const output = await run('npm', ['pack', '--pack-destination', into, '--json'], ROOT);
  // The JSON report sits among npm's and the build's own lines.
  const [{ filename }] = JSON.parse(output.slice(output.indexOf('['), output.lastIndexOf(']') + 1)) as Array<{ filename: string }>;
  return join(into, filename);
}

/** tsc's errors (`file(line,col): error TSn: message`, and the lines that continue one), by file. */
export function tscErrors(output: string): Array<{ file: string; line: number; column: number; message: string }> {
  const errors: Array<{ file: string; line: number; column: number; message: string }> = [];
  for (const text of output.split('\n')) {
    const error = /^(.+?)\((\d+),(\d+)\): error (TS\d+: .*)$/.exec(text);
    if (error) errors.push({ file: error[1], line: Number(error[2]), column: Number(error[3]), message: error[4] });
    else if (/^error TS\d+/.test(text)) errors.push({ file: '', line: 0, column: 0, message: text.slice('error '.length) });
    else if (text.trim() && errors.length > 0) errors[errors.length - 1].message += `\n${text}`;
  }
  return errors;
}

/**
 * tsc's errors as failures: a block's at the lines of its document, others (declarations, options) by file. A tsc
 * that failed without an error it could place (it crashed) is a failure too.
 */
function compileFailures(tsc: { output: string; failed: boolean }, snippets: Snippet[], app: string): Failure[] {
  const byFile = new Map(snippets.map((snippet) => [resolve(app, snippet.file), snippet]));
  const failures = new Map<string, Failure>();
  for (const error of tscErrors(tsc.output)) {
    const snippet = error.file ? byFile.get(resolve(app, error.file)) : undefined;
    const where = snippet ? `${snippet.block.doc}:${snippet.block.line}` : error.file || 'tsc';
    const at = snippet ? `${snippet.block.doc}:${snippet.block.line + error.line}:${error.column + snippet.block.indent} ` : '';
    const failure = failures.get(where) ?? { kind: snippet ? 'block' : 'tsc', where, messages: [] };
    failure.messages.push(`${at}${error.message}`);
    failures.set(where, failure);
  }
  if (tsc.failed && failures.size === 0) failures.set('tsc', { kind: 'tsc', where: 'tsc', messages: [tsc.output] });
  return [...failures.values()];
}

/** What failed, one entry per place (a block's errors together), in the documents' order. */
function report(failures: Failure[]): string {
  const byPlace = new Map<string, Failure>();
  for (const failure of failures) {
    const same = byPlace.get(failure.where);
    if (same) same.messages.push(...failure.messages);
    else byPlace.set(failure.where, { ...failure, messages: [...failure.messages] });
  }
  return [...byPlace.values()]
    .sort((a, b) => a.where.localeCompare(b.where, 'en', { numeric: true }))
    .map(({ where, messages }) => `\n✗ ${where}\n${messages.map((m) => `  ${m.replace(/\n/g, '\n  ')}`).join('\n')}`)
    .join('\n');
}

/** The last line: how many blocks, and what failed. */
function summary(snippets: Snippet[], failures: Failure[]): string {
  const files = new Set(snippets.map(({ block }) => block.doc)).size;
  const count = (kind: Failure['kind']) => failures.filter((f) => f.kind === kind).length;
  const problems = [
    [count('block'), 'fail to compile'],
    [count('tsc'), 'other tsc errors (declarations, options)'],
    [count('link'), 'broken links'],
    [count('label'), 'blocks of TypeScript not labelled ts'],
  ].filter(([n]) => n !== 0);
  const found = problems.map(([n, what]) => `${n} ${what}`).join(', ');
  return `${snippets.length} TypeScript blocks in ${files} files: ${found || 'all compile; every link resolves'}`;
}

async function main(): Promise<void> {
  const started = performance.now();
  const texts = new Map(documents().map((doc) => [doc, readFileSync(join(ROOT, doc), 'utf8')]));
  const blocks = [...texts].flatMap(([doc, text]) => fencedBlocks(doc, text));
  const snippets = placeSnippets(blocks);
  const failures = brokenLinks(texts);
  for (const block of blocks.filter(mislabelled)) {
    failures.push({
      kind: 'label',
      where: `${block.doc}:${block.line}`,
      messages: [`a \`\`\`${block.lang || '(no language)'} block holds TypeScript of ${PACKAGE}: label it ts, so it is compiled`],
    });
  }
  const app = mkdtempSync(join(tmpdir(), 'rl-docs-'));
  try {
    const [tarball, packMs] = await timed(async () => process.env.DOCS_TARBALL ?? (await pack(app)));
    const { deps, overrides } = dependencies(snippets, resolve(tarball));
    const manifest = { name: 'rl-docs-snippets', private: true, version: '0.0.0', dependencies: deps, overrides };
    writeFileSync(join(app, 'package.json'), JSON.stringify(manifest, null, 2));
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(TSCONFIG, null, 2));
    for (const { block, file } of snippets) {
      mkdirSync(dirname(join(app, file)), { recursive: true });
      writeFileSync(join(app, file), block.code);
    }
    const [, installMs] = await timed(() => run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], app));
    const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
    const [compiled, tscMs] = await timed(() =>
      run(process.execPath, [tsc, '-p', 'tsconfig.json', '--pretty', 'false'], app).then(
        (output) => ({ output, failed: false }),
        (error: Error) => ({ output: error.message, failed: true }),
      ),
    );
    failures.push(...compileFailures(compiled, snippets, app));
    const perDoc = new Map<string, number>();
    for (const { block } of snippets) perDoc.set(block.doc, (perDoc.get(block.doc) ?? 0) + 1);
    const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    if (failures.length > 0) console.log(report(failures));
    console.log(`\n${[...perDoc].map(([doc, count]) => `${doc}: ${count}`).join(', ')}`);
    const packed = process.env.DOCS_TARBALL ? 'skipped (DOCS_TARBALL)' : seconds(packMs);
    console.log(`npm pack ${packed}, npm install ${seconds(installMs)}, tsc ${seconds(tscMs)}, total ${seconds(performance.now() - started)}`);
    console.log(summary(snippets, failures));
    process.exitCode = failures.length === 0 ? 0 : 1;
  } finally {
    if (process.env.DOCS_KEEP) console.log(`app kept in ${app}`);
    else rmSync(app, { recursive: true, force: true });
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exitCode = 1;
  });
}
