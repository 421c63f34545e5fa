import { Redis } from 'ioredis';

/** Blocks this process's event loop for `ms`, as a GC pause, a slow handler or a saturated CPU does. */
export function blockLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy: nothing else runs
  }
}

/** What {@link stallAfterSending} saw. */
export interface Stall {
  /** Whether the stall happened (the `decisions`-th decision was written). */
  readonly happened: boolean;
  restore(): void;
}

/**
 * Blocks the event loop for `ms` right after ioredis (any client, a Cluster's node connections included) has
 * written the script call carrying the `decisions`-th decision since this call: Redis answers them
 * while the process is stalled, and the replies wait in the socket. Once; `restore()` puts ioredis back.
 */
export function stallAfterSending(decisions: number, ms: number): Stall {
  const original = Redis.prototype.sendCommand;
  const state = { sent: 0, happened: false };
  Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
    const result = original.apply(this, args);
    const [command] = args;
    if (!state.happened && (command.name === 'evalsha' || command.name === 'eval' || command.name === 'fcall')) {
      state.sent += decisionsIn(command.args);
      if (state.sent >= decisions) {
        state.happened = true;
        blockLoop(ms);
      }
    }
    return result;
  } as Redis['sendCommand'];
  return {
    get happened() {
      return state.happened;
    },
    restore: () => {
      Redis.prototype.sendCommand = original;
    },
  };
}

/**
 * Decisions in a script call's arguments (`sha, numkeys, ...keys, ...argv`): a one-policy call carries one; a
 * decide.lua call (a batch, across slots too) carries one per mode and policy count after its shapes (its header).
 */
function decisionsIn(args: ReadonlyArray<unknown>): number {
  const argument = String(args[2 + Number(args[1])]);
  if (!argument.startsWith('[')) return 1;
  const flat = JSON.parse(argument) as unknown[];
  let decisions = 0;
  for (let d = 1; d < flat.length; d += 2 + 2 * Number(flat[d + 1])) decisions++;
  return decisions;
}
