import type { RateLimitAlgorithm } from '../../algorithms/algorithm.interface';
import { RateLimitStoreError } from '../../errors/rate-limit-store.error';
import { MAX_POLICIES_PER_DECISION, type RateLimitCall } from '../store.interface';
import { decisionKeyCount, luaScript, type LuaScript, type OwnCall, type OwnScript } from './redis-codec';
import { composeAcrossSlotsScript, composeDecideScript, composeOnePolicyScript } from './redis-scripts';
import { OnePolicyFunctions } from './one-policy-functions';
import type { RedisScriptTransport, ScriptRunner } from './transports/redis-transport';

/**
 * The decision scripts of one store, prepared on its transport, and the one call of its own a decision (or a
 * refund, lockout or penalty) is sent as: per algorithm its one-policy script (or, where the server has the
 * library, its function) and its decide.lua, decide.lua holding every algorithm for several policies, and
 * decide.lua across slots for a Cluster master's batch. How decisions are batched is the dispatcher's.
 */
export class DecisionScripts {
  /**
   * Per algorithm: one policy's decision (one-policy script: `run` prepared for the auto-pipeline, `send` written
   * at once), and one policy's refund, lockout or penalty (decide.lua).
   */
  private readonly onePolicy = new Map<string, { script: LuaScript; run: ScriptRunner; send: ScriptRunner }>();
  private readonly algorithm = new Map<string, { script: LuaScript; run: ScriptRunner }>();
  /** decide.lua holding every algorithm; `anyAlgorithmRun[n]` calls it with n policies' keys. */
  readonly anyAlgorithm: LuaScript;
  private readonly anyAlgorithmRun: ScriptRunner[] = [];
  /** decide.lua across slots: one call per Cluster master and batch. */
  readonly acrossSlots: LuaScript;
  private readonly functions: OnePolicyFunctions;

  constructor(transport: RedisScriptTransport, algorithms: readonly RateLimitAlgorithm[]) {
    for (const algorithm of algorithms) {
      const { name, keyTag } = algorithm;
      const one = luaScript(composeOnePolicyScript(algorithm));
      const own = luaScript(composeDecideScript([algorithm]));
      this.onePolicy.set(name, {
        script: one,
        run: transport.prepare(one, decisionKeyCount(1), `rlDecideOne_${keyTag}`),
        send: (keys, args) => transport.evalScript(one, keys, args),
      });
      this.algorithm.set(name, { script: own, run: transport.prepare(own, decisionKeyCount(1), `rlDecide_${keyTag}`) });
    }
    this.anyAlgorithm = luaScript(composeDecideScript(algorithms));
    for (let n = 1; n <= MAX_POLICIES_PER_DECISION; n++) {
      this.anyAlgorithmRun[n] = transport.prepare(this.anyAlgorithm, decisionKeyCount(n), `rlDecideAll_${n}`);
    }
    this.acrossSlots = luaScript(composeAcrossSlotsScript(algorithms));
    this.functions = new OnePolicyFunctions(transport, algorithms);
  }

  /**
   * `call` (`calls` in one of decide.lua's modes, as redis-codec.ts's `ownCall` writes it) as a call of its own:
   * a prepared command (which a client's auto-pipeline may group), or the one-policy function where the library
   * is loaded.
   */
  sendOwn(calls: readonly RateLimitCall[], call: OwnCall): Promise<unknown> {
    const name = calls[0].algorithm.name;
    const run =
      call.script === 'one-policy'
        ? this.onePolicy.get(name)?.run
        : call.script === 'algorithm'
          ? this.algorithm.get(name)?.run
          : this.anyAlgorithmRun[calls.length];
    if (!run) {
      return Promise.reject(
        new RateLimitStoreError(
          `A decision covers ${calls.length} policies of one tracker; at most ${MAX_POLICIES_PER_DECISION} are supported.`,
          { outage: false },
        ),
      );
    }
    const asFunction = call.script === 'one-policy' ? this.functions.call(name, call.keys, call.args, true, run) : undefined;
    return asFunction ?? run(call.keys, call.args);
  }

  /**
   * A single one-policy decision written straight to the connection (not through the client's auto-pipeline,
   * which would hold it for another turn): the function where the library is loaded, else the script.
   */
  sendOnePolicy(algorithm: string, keys: string[], args: string[]): Promise<unknown> {
    const { send } = this.onePolicy.get(algorithm)!;
    return this.functions.call(algorithm, keys, args, false, send) ?? send(keys, args);
  }

  /** The script a call of its own runs, for a pipeline (which sends scripts, not prepared commands). */
  scriptOf(calls: readonly RateLimitCall[], script: OwnScript): LuaScript {
    if (script === 'any-algorithm') return this.anyAlgorithm;
    return (script === 'one-policy' ? this.onePolicy : this.algorithm).get(calls[0].algorithm.name)!.script;
  }
}
