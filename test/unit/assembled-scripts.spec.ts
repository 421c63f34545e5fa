/**
 * docs/scripts/ holds every script the Redis store sends, as Redis receives it (scripts/assemble-scripts.ts):
 * each file equals what the store composes now, and no file is left over from a script it no longer sends. No
 * decision script reads a deny key (each instance holds the denies in force: lib/pipeline/deny-list.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RateLimitAlgorithmRegistry } from '../../lib/algorithms/algorithm.registry';
import { DecideCall, decisionKeyCount, onePolicyCall, UnitShapes } from '../../lib/stores/redis/redis-codec';
import { assembledScripts } from '../../lib/stores/redis/redis-scripts';
import type { RateLimitCall } from '../../lib/stores/store.interface';

const DIR = join(__dirname, '..', '..', 'docs', 'scripts');
const scripts = assembledScripts(new RateLimitAlgorithmRegistry().all());

test('one file per script: one-policy and decide per algorithm, decide with all of them, across slots, and the function library', () => {
  expect([...scripts.keys()].length).toBe(17);
  expect(
    readdirSync(DIR)
      .filter((f) => f.endsWith('.lua'))
      .sort(),
  ).toEqual([...scripts.keys()].sort());
});

test.each([...scripts.keys()])('docs/scripts/%s is up to date (npm run assemble-scripts)', (name) => {
  expect(readFileSync(join(DIR, name), 'utf8')).toBe(scripts.get(name));
});

/** A script's code without its comments (the `--[[ … ]]` header and `-- …` lines). */
function code(lua: string): string {
  return lua.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--.*$/gm, '');
}

test.each([...scripts.keys()])('%s reads no deny key: its code names none and replies no deny (the deny list answers them)', (name) => {
  const lua = code(readFileSync(join(DIR, name), 'utf8'));
  // The verdict codes' prelude declares VERDICT_DENIED (it is TypeScript's too); nothing else may name a deny.
  // (The function library holds one prelude per algorithm.)
  const lines = lua.split('\n').filter((line) => /deny|denied|denial|dkey/i.test(line));
  expect(lines).toEqual(new Array(name === 'one-policy.library.lua' ? 7 : 1).fill('local VERDICT_DENIED = 5'));
});

test('a decision sends two keys per policy, its state and its lockout: no deny key', () => {
  const algorithm = new RateLimitAlgorithmRegistry().get('fixed-window');
  const call: RateLimitCall = {
    algorithm,
    params: { limit: 5, windowMs: 60_000, burst: 5 },
    cost: 1,
    blockForMs: 0,
    stateKey: 'rl:{t}:s',
    blockKey: 'rl:{t}:b',
    denyKey: 'rl:{t}:deny',
    token: '',
    fallback: 'insurance',
    refundable: false,
  };
  expect(decisionKeyCount(1)).toBe(2);
  expect(onePolicyCall(call, 'c').keys).toEqual(['rl:{t}:s', 'rl:{t}:b']);
  expect(new DecideCall().add([call, { ...call, stateKey: 'rl:{t}:s2', blockKey: 'rl:{t}:b2' }], 'c').keys).toEqual([
    'rl:{t}:s',
    'rl:{t}:b',
    'rl:{t}:s2',
    'rl:{t}:b2',
  ]);
});

test("decide.lua's argument: each distinct shape once, a unit decision's shape the same whether made or remembered", () => {
  const registry = new RateLimitAlgorithmRegistry();
  const params = { limit: 5, windowMs: 60_000, burst: 5 };
  const call: RateLimitCall = {
    algorithm: registry.get('fixed-window'),
    params,
    cost: 1,
    blockForMs: 0,
    stateKey: 'rl:{t}:s',
    blockKey: 'rl:{t}:b',
    token: '',
    fallback: 'insurance',
    refundable: false,
  };
  const shapes = new UnitShapes();
  const args = (unitShapes?: UnitShapes) =>
    new DecideCall(unitShapes)
      .add([call], 'c')
      .add([{ ...call, blockForMs: 1_000 }], 'c')
      .add([{ ...call, algorithm: registry.get('gcra') }], 'p')
      .add([{ ...call, cost: 3, hold: 2 }], 'c')
      .add([call, { ...call, token: 'a b' }], 'c').args;
  const expected = [
    '[[[1,1,5,60000,5,0],[1,1,5,60000,5,1000],[5,1,5,60000,5,0],[1,3,5,60000,5,0,2]],1,1,1,0,1,1,2,0,2,1,3,0,1,1,4,0,1,2,1,0,1,"a b"]',
  ];
  // Twice with the store's shapes: the second time every unit shape comes from what the first remembered of `params`.
  expect(args(shapes)).toEqual(expected);
  expect(args(shapes)).toEqual(expected);
  // A call of its own makes every shape.
  expect(args()).toEqual(expected);
});
