import { Redis } from 'ioredis';
import { decisionKeyCount } from '../../lib/stores/redis/redis-codec';

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
 * written the script call carrying the `decisions`-th one-policy decision since this call: Redis answers them
 * while the process is stalled, and the replies wait in the socket. Once; `restore()` puts ioredis back.
 */
export function stallAfterSending(decisions: number, ms: number): Stall {
  const original = Redis.prototype.sendCommand;
  const state = { sent: 0, happened: false };
  Redis.prototype.sendCommand = function (this: Redis, ...args: Parameters<Redis['sendCommand']>) {
    const result = original.apply(this, args);
    const [command] = args;
    if (!state.happened && (command.name === 'evalsha' || command.name === 'eval')) {
      state.sent += Number(command.args[1]) / decisionKeyCount(1);
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
