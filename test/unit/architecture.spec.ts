import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

/**
 * lib/ in layers, each importing only from the layers below it: storage never learns about the pipeline, the
 * pipeline never about Nest, and what a request goes through is found by reading upwards. A layer is a folder
 * of lib/ or one of its top-level files.
 */
const LAYERS: ReadonlyArray<readonly string[]> = [
  ['errors'],
  ['shared'],
  ['interfaces'],
  ['algorithms'],
  ['policy'],
  ['stores'],
  ['pipeline'],
  // The Nest surface: declarations first, then what answers a request, then what wires it.
  ['rate-limit.exception.ts', 'rate-limit.decorator.ts', 'rate-limit.module-definition.ts'],
  ['http'],
  ['contexts'],
  ['events'],
  ['overload'],
  ['service'],
  ['routes'],
  ['rate-limit-admin.service.ts', 'rate-limit-outbound.service.ts'],
  ['rate-limit.guard.ts', 'rate-limiter.service.ts'],
  ['rate-limit.module.ts'],
  ['event-emitter', 'opentelemetry', 'prometheus', 'terminus', 'testing'],
  ['index.ts'],
];
const LIB = join(__dirname, '..', '..', 'lib');

/** lib/'s files (relative, `/`-separated) and the lib/ files each imports, type-only imports included. */
function importGraph(): Map<string, string[]> {
  const files = readdirSync(LIB, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(join(LIB, file), 'utf8');
    const targets = [...text.matchAll(/(?:from|import\()\s*'(\.[^']*)'/g)].map(([, spec]) => {
      const base = normalize(join(dirname(file), spec));
      return files.includes(`${base}.ts`) ? `${base}.ts` : `${base}/index.ts`;
    });
    graph.set(file, targets);
  }
  return graph;
}

const layerOf = (file: string): number => LAYERS.findIndex((names) => names.includes(file.split('/')[0]));

describe('lib/ architecture', () => {
  const graph = importGraph();

  it('puts every file in a layer', () => {
    expect([...graph.keys()].filter((file) => layerOf(file) === -1)).toEqual([]);
  });

  it('imports only downwards: no folder imports from its own layer or one above it', () => {
    const upwards = [...graph].flatMap(([file, targets]) =>
      targets
        .filter((target) => {
          const [from, to] = [layerOf(file), layerOf(target)];
          return to > from || (to === from && file.split('/')[0] !== target.split('/')[0]);
        })
        .map((target) => `${file} -> ${target}`),
    );
    expect(upwards).toEqual([]);
  });

  it('has no import cycle between files', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (file: string): void => {
      state.set(file, 'open');
      path.push(file);
      for (const target of graph.get(file) ?? []) {
        if (state.get(target) === 'open') cycles.push([...path.slice(path.indexOf(target)), target].join(' > '));
        else if (!state.has(target)) visit(target);
      }
      path.pop();
      state.set(file, 'done');
    };
    for (const file of graph.keys()) if (!state.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });

  it('reads the layers from lib/ itself: every folder there is in one', () => {
    const folders = readdirSync(LIB, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
    expect(folders.filter((name) => !LAYERS.flat().includes(name))).toEqual([]);
  });
});
