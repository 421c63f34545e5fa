import type { RateLimitDecision } from '../interfaces/decision.interface';
import { abortError, checkWaitOptions, retryTooLate, shutdownError, slotTooLate, WaitRefusals } from './wait-errors';
import { CounterOutlook } from './wait-outlook';
import { unlisten, WaiterLine, type Waiter } from './waiter-line';
import type { AcquireTurn } from './acquire-turns';

export { paceOf, type WaitPace } from './wait-outlook';

/** Most `acquire()` calls of one process that may wait on one policy + key, unless the module or the call says otherwise. */
export const DEFAULT_MAX_WAITERS = 1_000;

/** What a wait may take: the waiting part of `AcquireOptions`. */
export interface WaitOptions {
  maxWaitMs?: number;
  maxWaiters?: number;
  signal?: AbortSignal;
}

/** The calls of this process waiting on one counter, first come first served: only the head asks the store. */
interface Queue {
  readonly key: string;
  readonly line: WaiterLine;
  readonly outlook: CounterOutlook;
  /** The head's sleep until its turn. */
  timer: NodeJS.Timeout | undefined;
}

/**
 * The waits of `RateLimiterService.acquire()` in one process. Calls on the same counter form a FIFO queue
 * whose head alone asks the store: when it is admitted the next becomes head and asks at once; when it is
 * told to retry later it sleeps until then, and every call behind it whose soonest start (see
 * {@link CounterOutlook.soonest}) is past its `maxWaitMs` rejects at once. Each process thus has one caller
 * contending per counter, however many calls it has waiting: none takes a shared quota by sheer numbers.
 *
 * A queue holds at most `maxWaiters` calls. Nothing outlives its calls: a queue is dropped when empty, its
 * one timer runs only while its head sleeps, and each call's abort listener is removed when it settles.
 */
export class RateLimitWaiters {
  private readonly queues = new Map<string, Queue>();
  /** Leaky-bucket delays of admitted calls, each as the function that ends it at shutdown. */
  private readonly delays = new Set<() => void>();
  private shuttingDown = false;
  private readonly refusals = new WaitRefusals();

  constructor(private readonly defaultMaxWaiters = DEFAULT_MAX_WAITERS) {}

  /** Calls of this process waiting on `queueKey` (queued, asking the store, or sleeping until their turn). */
  waiting(queueKey: string): number {
    return this.queues.get(queueKey)?.line.size ?? 0;
  }

  /** Waits for the turn's quota (see the class); resolves with the admitting decision. */
  acquire(turn: AcquireTurn, options: WaitOptions): Promise<RateLimitDecision> {
    const { maxWaitMs = Infinity, maxWaiters = this.defaultMaxWaiters, signal } = options;
    checkWaitOptions(maxWaitMs, maxWaiters);
    if (signal?.aborted) return this.refusals.refuse(abortError());
    const found = this.queues.get(turn.queueKey);
    const refused = found && this.refusal(found, turn, maxWaitMs, maxWaiters);
    if (refused) return this.refusals.refuse(refused);
    const queue = found ?? this.open(turn.queueKey);
    return new Promise<RateLimitDecision>((resolve, reject) => {
      const waiter: Waiter = {
        turn,
        deadline: performance.now() + maxWaitMs,
        maxWaitMs,
        signal,
        resolve,
        reject,
        onAbort: undefined,
        asking: false,
        inLine: false,
      };
      if (signal) {
        waiter.onAbort = () => this.aborted(queue, waiter);
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      queue.line.push(waiter);
      if (queue.line.size === 1) this.serve(queue);
    });
  }

  /**
   * The app begins to close: every call that waits ends at once with a RateLimitShutdownError, and no wait
   * starts any more. A head whose store call is in flight keeps its answer when it allows (the quota is taken).
   */
  shutdown(): void {
    this.shuttingDown = true;
    for (const queue of [...this.queues.values()]) {
      clearTimeout(queue.timer);
      queue.timer = undefined;
      queue.line.retain((waiter) => {
        if (waiter.asking) return true;
        this.settle(waiter, shutdownError(waiter.turn, 'wait'));
        return false;
      });
      if (queue.line.size === 0) this.drop(queue);
    }
    for (const end of [...this.delays]) end();
  }

  private open(key: string): Queue {
    const queue: Queue = { key, line: new WaiterLine(), outlook: new CounterOutlook(), timer: undefined };
    this.queues.set(key, queue);
    return queue;
  }

  /**
   * Why a call cannot join `queue`: shutdown, a full queue, or a soonest start past its `maxWaitMs`. O(1): the
   * units between the head and the call are the line's running total less the head's cost.
   */
  private refusal(queue: Queue, turn: AcquireTurn, maxWaitMs: number, maxWaiters: number): Error | undefined {
    if (this.shuttingDown) return shutdownError(turn, 'wait');
    const { line } = queue;
    const now = performance.now();
    const headCost = line.head?.turn.cost ?? 0;
    const start = queue.outlook.soonest(now, turn.cost, turn.pace, turn.cost + line.units - headCost, headCost);
    const wait = Math.ceil(start - now);
    if (line.size >= maxWaiters) return this.refusals.lineFull(turn, line.size, maxWaiters, wait);
    return wait > maxWaitMs ? this.refusals.tooLate(turn, wait, maxWaitMs, line.size) : undefined;
  }

  /**
   * Gives the head its turn: a head that cannot start before its deadline leaves at once; one the counter
   * cannot take yet (a lockout, or a retry told for no smaller a cost) sleeps until it can; others ask the store.
   */
  private serve(queue: Queue, woke = false): void {
    let head: Waiter | undefined;
    while ((head = queue.line.head)) {
      const now = performance.now();
      const start = queue.outlook.soonest(now, head.turn.cost, head.turn.pace, 0, head.turn.cost);
      // Only a wait still to come turns a call away: one whose deadline passed while in line still asks, and
      // takes its turn if the store gives it now (as a call that never waited would).
      if (start <= head.deadline || start <= now) break;
      queue.line.remove(head);
      this.settle(head, this.refusals.tooLate(head.turn, Math.ceil(start - now), head.maxWaitMs, 0));
    }
    if (!head) return this.drop(queue);
    const until = woke ? 0 : queue.outlook.sleepUntil(head.turn.cost, performance.now());
    if (until > 0) return this.sleep(queue, until - performance.now());
    const asking = head;
    asking.asking = true;
    asking.turn.take().then(
      ({ decision, giveBack }) => this.answered(queue, asking, decision, giveBack),
      (error: Error) => {
        asking.asking = false;
        this.leave(queue, asking, error);
      },
    );
  }

  private sleep(queue: Queue, ms: number): void {
    queue.timer = setTimeout(() => {
      queue.timer = undefined;
      this.serve(queue, true);
    }, ms);
  }

  private answered(queue: Queue, head: Waiter, decision: RateLimitDecision, giveBack: () => Promise<void>): void {
    head.asking = false;
    const now = performance.now();
    if (decision.allowed) {
      queue.outlook.admitted();
      queue.line.remove(head);
      unlisten(head);
      this.admitted(head, decision, giveBack, now);
      // The next head asks at once: no extra sleep between two admissions.
      this.serve(queue);
      return;
    }
    queue.outlook.rejected(now, head.turn.cost, decision);
    const refused = this.headRefusal(head, decision, now);
    if (refused) return this.leave(queue, head, refused, true);
    this.prune(queue, now);
    this.sleep(queue, decision.retryAfterMs);
  }

  /** Why a head told to retry later stops waiting: aborted, shutdown, a cost that never fits, or past its deadline. */
  private headRefusal(head: Waiter, decision: RateLimitDecision, now: number): Error | undefined {
    const retry = decision.retryAfterMs;
    if (head.signal?.aborted) return abortError();
    if (this.shuttingDown) return shutdownError(head.turn, 'wait');
    if (!Number.isFinite(retry) || now + retry > head.deadline) {
      return retryTooLate(head.turn, decision.policy, decision.limit, retry, head.maxWaitMs);
    }
    return undefined;
  }

  /**
   * Rejects, at once, every call behind the head whose soonest start is past its deadline. O(n) in the calls
   * waiting, once per store answer that tells the head to wait (each call's start depends on the costs ahead
   * of it); nothing while no call in line has a deadline (the default `maxWaitMs`), since none can be past it.
   */
  private prune(queue: Queue, now: number): void {
    const { line, outlook } = queue;
    if (line.bounded === 0) return;
    const head = line.head;
    const headCost = head?.turn.cost ?? 0;
    let units = 0;
    line.retain((waiter, ahead) => {
      if (waiter === head) return true;
      const { turn } = waiter;
      const start = outlook.soonest(now, turn.cost, turn.pace, units + turn.cost, headCost);
      if (start > waiter.deadline && start > now) {
        this.settle(waiter, this.refusals.tooLate(turn, Math.ceil(start - now), waiter.maxWaitMs, ahead));
        return false;
      }
      units += turn.cost;
      return true;
    });
  }

  /** An admitted call proceeds, after its leaky-bucket delay when it has one that fits its deadline. */
  private admitted(waiter: Waiter, decision: RateLimitDecision, giveBack: () => Promise<void>, now: number): void {
    const delay = decision.delayMs ?? 0;
    if (delay <= 0) return waiter.resolve(decision);
    const { turn, signal } = waiter;
    if (now + delay > waiter.deadline) {
      // Its slot lies past the deadline: give it back rather than hold the call longer than it may wait. A
      // give-back that fails leaves the slot taken, which only errs on the strict side.
      giveBack().catch(() => undefined);
      return waiter.reject(slotTooLate(turn, delay, waiter.maxWaitMs));
    }
    if (this.shuttingDown) return waiter.reject(shutdownError(turn, 'delay'));
    const end = (error?: Error) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      this.delays.delete(onShutdown);
      if (error) waiter.reject(error);
      else waiter.resolve(decision);
    };
    const onAbort = () => end(abortError());
    const onShutdown = () => end(shutdownError(turn, 'delay'));
    const timer = setTimeout(end, delay);
    this.delays.add(onShutdown);
    signal?.addEventListener('abort', onAbort, { once: true });
    // The signal may have aborted while the decision was on its way.
    if (signal?.aborted) onAbort();
  }

  private aborted(queue: Queue, waiter: Waiter): void {
    // A head whose store call is in flight leaves when the answer comes (it may have taken quota).
    if (waiter.asking) return;
    this.leave(queue, waiter, abortError());
  }

  /**
   * Takes `waiter` out of `queue` and rejects it; when it was the head, the next one is served. `told`: the
   * counter has just answered the head, so what it said may turn away calls behind it.
   */
  private leave(queue: Queue, waiter: Waiter, error: Error, told = false): void {
    const wasHead = queue.line.head === waiter;
    queue.line.remove(waiter);
    this.settle(waiter, error);
    if (!wasHead) return;
    clearTimeout(queue.timer);
    queue.timer = undefined;
    queue.outlook.headLeft();
    // What the counter said still binds the calls left: those it leaves past their deadline go now. Only a new
    // answer can leave any: without a sleeping head a call's soonest start comes no later than it was at its
    // join or at the last prune, both against what the counter had said then (an abort, or a store call that
    // failed, tells nothing new). So a head that leaves for those costs O(1), not a prune.
    if (told) this.prune(queue, performance.now());
    this.serve(queue);
  }

  /** Rejects a call that has left its queue. */
  private settle(waiter: Waiter, error: Error): void {
    unlisten(waiter);
    waiter.reject(error);
  }

  private drop(queue: Queue): void {
    clearTimeout(queue.timer);
    queue.timer = undefined;
    if (this.queues.get(queue.key) === queue) this.queues.delete(queue.key);
  }
}
