import { createHash } from 'node:crypto';
import { RateLimitStoreError } from '../../errors/rate-limit-store.error';
import type { AlgorithmParams } from '../../algorithms/algorithm.interface';
import type { LockoutEscalation } from '../../policy/compile-escalation';
import type { RateLimitCall, StoreDecision, StoreVerdict } from '../store.interface';
import { Verdict } from '../verdicts';
import { readsClockLazily } from './redis-scripts';

/**
 * The wire format of the decision scripts (algorithms/decide.lua), shared by every Redis client's transport:
 * how a decision's keys and argument are written, and how its reply is read.
 */

export const MODE_CODE = { consume: 'c', peek: 'p' } as const;
export const REPLY_PER_CALL = 6;
export const KEYS_PER_CALL = 2;

/**
 * Keys of one decision of `policies` policies: each one's state and lockout key. No deny key: a denied tracker
 * is answered before any script runs (lib/pipeline/deny-list.ts holds every deny in force).
 */
export function decisionKeyCount(policies: number): number {
  return policies * KEYS_PER_CALL;
}

/** A decision script and its SHA-1 (the name `EVALSHA` calls it by). */
export interface LuaScript {
  lua: string;
  sha: string;
}

export function luaScript(lua: string): LuaScript {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

/** The number decide.lua reads for each mode letter (its header: 1 consume, 2 peek, 3 refund, 4 block, 5 penalty). */
const MODE_NUMBER: Readonly<Record<string, number>> = { c: 1, p: 2, r: 3, b: 4, x: 5 };

/**
 * The keys and the one argument of a decide.lua call, written decision after decision in the layout its header
 * gives (the one place it is written down): keys per policy (state, lockout); one JSON array of the call's
 * distinct policy shapes (algorithm id, cost (units), limit, window (ms), burst, blockFor (ms), and the hold
 * (units) only when there is one), then, per decision, its mode and its number of policies, and per policy its shape's index and its token (0
 * for none). Numbers are whole, so they print exactly. A calendar window's window is its four period starts,
 * and an escalating lockout's blockFor `[first ms, factor, max ms, forgiveAfter ms]`: nested arrays.
 */
export class DecideCall {
  readonly keys: string[] = [];
  /** Each distinct shape's index (from 1), by its JSON: the decisions of one tick mostly share a few policies. */
  private readonly shapes = new Map<string, number>();
  private shapesJson = '';
  private json = '';

  /** @param unitShapes the store's remembered unit shapes; without them (a call of its own), each shape is made. */
  constructor(private readonly unitShapes?: UnitShapes) {}

  /** Appends one decision of `calls` (one tracker's policies) in `mode` (`c`, `p`, `r`, `b` or `x`). */
  add(calls: readonly RateLimitCall[], mode: string): this {
    let json = `,${MODE_NUMBER[mode]},${calls.length}`;
    for (const { algorithm, cost, params, blockForMs, escalate, token, stateKey, blockKey, hold } of calls) {
      this.keys.push(stateKey, blockKey);
      const shape =
        this.unitShapes !== undefined && cost === 1 && !hold && escalate === undefined && params.periods === undefined
          ? this.unitShapes.get(algorithm.id, params, blockForMs)
          : shapeOf(algorithm.id, cost, params, blockForMs, escalate, hold);
      let index = this.shapes.get(shape);
      if (index === undefined) {
        index = this.shapes.size + 1;
        this.shapes.set(shape, index);
        this.shapesJson += index === 1 ? shape : `,${shape}`;
      }
      json += `,${index},${token === '' ? 0 : JSON.stringify(token)}`;
    }
    this.json += json;
    return this;
  }

  /** The call's ARGV: the one array. */
  get args(): string[] {
    return [`[[${this.shapesJson}]${this.json}]`];
  }
}

/** A decision's shape in decide.lua's argument (see {@link DecideCall}). */
function shapeOf(
  id: number,
  cost: number,
  params: AlgorithmParams,
  blockForMs: number,
  escalate: LockoutEscalation | undefined,
  hold = 0,
): string {
  // An escalating lockout is [first, factor, max, forgiveAfter]; a plain one stays a number.
  const blockFor = escalate === undefined ? blockForMs : `[${blockForMs},${escalate.factor},${escalate.maxMs},${escalate.forgiveAfterMs}]`;
  // A hold (policy `reserve`) is a seventh value, written only when there is one: the usual shape stays six.
  const window = params.periods === undefined ? params.windowMs : params.periods.json;
  return `[${id},${cost},${params.limit},${window},${params.burst},${blockFor}${hold ? `,${hold}` : ''}]`;
}

/**
 * The shapes of plain decisions of one unit (a fixed window, no escalation, no hold), by their params: made once
 * per params rather than per decision, since each shape string made anew costs its number conversions, its hash in
 * {@link DecideCall}'s map, and garbage for every decision of a batch. One per store, handed to each call.
 */
export class UnitShapes {
  private readonly byParams = new WeakMap<AlgorithmParams, { id: number; blockForMs: number; shape: string }>();

  get(id: number, params: AlgorithmParams, blockForMs: number): string {
    const known = this.byParams.get(params);
    if (known !== undefined && known.id === id && known.blockForMs === blockForMs) return known.shape;
    const shape = shapeOf(id, 1, params, blockForMs, undefined);
    this.byParams.set(params, { id, blockForMs, shape });
    return shape;
  }
}

/**
 * Whether a decision goes to its algorithm's one-policy script (algorithms/one-policy.lua: the keys {@link DecideCall}
 * writes, the argument {@link onePolicyCall} writes, the reply {@link parseOnePolicyReply} reads): one policy,
 * consumed or peeked, with a plain window and a plain lockout (a calendar window, which can fail the decision,
 * and an escalating lockout go to decide.lua).
 */
export function isOnePolicy(calls: readonly RateLimitCall[], mode: string): boolean {
  if (calls.length !== 1 || (mode !== 'c' && mode !== 'p')) return false;
  return calls[0].params.periods === undefined && calls[0].escalate === undefined;
}

/**
 * Shortest window whose decisions may leave the clock unread: {@link ServerClock} then finds the server's now
 * exactly from the window's end, while its estimate is within half a window (5 s here) of the server's clock.
 */
export const LAZY_CLOCK_MIN_WINDOW_MS = 10_000;

/**
 * A one-policy decision's keys and argument (algorithms/one-policy.lua, for a call {@link isOnePolicy} accepts): the keys
 * {@link DecideCall} writes, then one argument of values joined by spaces, no JSON (the script holds one
 * algorithm, so no id): cost (`n<units>` when negative, `<cost>+<hold>` when the call holds units back, policy
 * `reserve`), limit, window ms, blockFor ms or `p` for a peek, then burst for an algorithm whose capacity it is,
 * else the token when there is one (last: it may hold spaces); numbers in hex, which Redis's Lua reads for a
 * fraction of what decimal costs it. A second argument `t` asks a fixed-window script for the server's clock.
 */
export function onePolicyCall(call: RateLimitCall, mode: string): { keys: string[]; args: string[] } {
  const { algorithm, cost, params, token, hold } = call;
  const units = cost < 0 ? `n${(-cost).toString(16)}` : cost.toString(16);
  const blockFor = mode === 'p' ? 'p' : call.blockForMs.toString(16);
  const packed = `${hold ? `${units}+${hold.toString(16)}` : units} ${params.limit.toString(16)} ${params.windowMs.toString(16)} ${blockFor}`;
  const args = [algorithm.usesBurst ? `${packed} ${params.burst.toString(16)}` : token === '' ? packed : `${packed} ${token}`];
  if (readsClockLazily(algorithm) && needsClock(call, mode)) args.push('t');
  return { keys: [call.stateKey, call.blockKey], args };
}

/**
 * Whether a one-policy decision's script must read the server's clock for its `nowMs`: a peek (its caller
 * measures from that clock), a charge that may be settled later (a settlement says when it charged), a slice's
 * grant (it expires on that clock), and a window under {@link LAZY_CLOCK_MIN_WINDOW_MS}. Any other fixed-window
 * decision reads the clock only on its window's first hit, and {@link ServerClock} finds its `nowMs`.
 */
function needsClock(call: RateLimitCall, mode: string): boolean {
  return mode === 'p' || call.refundable || (call.slice ?? 0) > 0 || call.params.windowMs < LAZY_CLOCK_MIN_WINDOW_MS;
}

/**
 * One decision of a script reply: six integers per policy from `offset` (see algorithms/decide.lua's header):
 * status (a {@link Verdict} code), remaining, reset, retry after, delay and more.
 */
export function parseDecision(reply: readonly number[], offset: number, policies: number): StoreDecision {
  const verdicts: StoreVerdict[] = [];
  let allowed = true;
  for (let i = 0; i < policies; i++) {
    const b = offset + i * REPLY_PER_CALL;
    // The status is a Verdict code as the script wrote it (VERDICT_* in the scripts): read as it is.
    const status = reply[b] as Verdict;
    if (status !== Verdict.Allowed) allowed = false;
    verdicts.push({
      allowed: status === Verdict.Allowed,
      remaining: reply[b + 1],
      resetMs: reply[b + 2],
      retryAfterMs: reply[b + 3],
      delayMs: reply[b + 4],
      moreQuotaMs: reply[b + 5],
      reason: status,
    });
  }
  return { nowMs: reply[0], allowed, verdicts };
}

/**
 * The reply of a one-policy decision (algorithms/one-policy.lua): now, status, remaining, reset, more, then retry after and
 * delay when the script did not leave them out as 0. The same decision {@link parseDecision} reads from decide.lua's reply.
 */
export function parseOnePolicyReply(reply: ReadonlyArray<number | string>): StoreDecision {
  const status = reply[1] as Verdict;
  const verdict: StoreVerdict = {
    allowed: status === Verdict.Allowed,
    remaining: reply[2] as number,
    resetMs: reply[3] as number,
    retryAfterMs: (reply[5] as number | undefined) ?? 0,
    delayMs: (reply[6] as number | undefined) ?? 0,
    moreQuotaMs: reply[4] as number,
    reason: status,
  };
  return { nowMs: reply[0] as number, allowed: verdict.allowed, verdicts: [verdict] };
}

/**
 * The words of a state value the scripts did not write (state.lua's foreignValue), after `Redis key `: each
 * client and path adds its own around a script's error (GLIDE reads `Redis` as an error code, `Redis: key`;
 * the script's line; `Redis failed the decision:`).
 */
const FOREIGN_VALUE = /key ("[\s\S]*?, which the rate limiter did not write: [\s\S]*? or delete the key\.)/;

/**
 * For an error that someone else's data under our prefix caused, an error naming the key, so the operator
 * can fix the prefix: a state string the scripts did not write (named by the script), or a key of another
 * Redis type (WRONGTYPE; `typeOf` asks the server for a key's type, `TYPE`).
 */
export async function explainForeignData(
  calls: readonly RateLimitCall[],
  cause: Error,
  typeOf: (key: string) => Promise<string>,
): Promise<Error> {
  const foreignValue = FOREIGN_VALUE.exec(cause.message);
  if (foreignValue) return new RateLimitStoreError(`Redis key ${foreignValue[1]}`, { cause, outage: false });
  if (!cause.message.includes('WRONGTYPE')) return cause;
  for (const call of calls) {
    for (const [key, expected] of [
      [call.stateKey, call.algorithm.redisType],
      [call.blockKey, 'string'],
    ] as const) {
      const type = await typeOf(key);
      if (type !== 'none' && type !== expected) {
        return new RateLimitStoreError(
          `Redis key "${key}" holds a ${type}, but ${call.algorithm.name} keeps a ${expected} there: another ` +
            `application writes under this prefix. Give the rate limiter its own 'prefix' or delete the key.`,
          { cause, outage: false },
        );
      }
    }
  }
  return cause;
}

/**
 * Which script a call of its own runs, which also says how its reply reads: its algorithm's one-policy script
 * ({@link isOnePolicy}), decide.lua holding its one algorithm, or decide.lua holding every algorithm (several policies).
 */
export type OwnScript = 'one-policy' | 'algorithm' | 'any-algorithm';

/** A call of its own: its script, and its keys and argument in that script's layout. */
export interface OwnCall {
  script: OwnScript;
  keys: string[];
  args: string[];
}

/** `calls` as a call of their own, its script found once (it decides the layout and, later, the reply's). */
export function ownCall(calls: readonly RateLimitCall[], mode: string): OwnCall {
  if (isOnePolicy(calls, mode)) return { script: 'one-policy', ...onePolicyCall(calls[0], mode) };
  const { keys, args } = new DecideCall().add(calls, mode);
  return { script: calls.length === 1 ? 'algorithm' : 'any-algorithm', keys, args };
}
