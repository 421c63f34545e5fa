import { Logger } from '@nestjs/common';
import { IntervalWarning } from '../shared/interval-warning';
import type { DenyWrite, DenyWriteResult, RateLimitStore } from '../stores/store.interface';

/**
 * How often the fleet carries 1.0 deny keys over while a 1.0 instance is live, ms (one instance at a time: the
 * marker `denies-write.lua` sets lives this long).
 */
export const CARRY_OVER_EVERY_MS = 10_000;
/** 1.0 deny keys carried over per write. */
const PER_WRITE = 500;

/** What the carry-over needs of the deny list: its writes to the channel, the key prefix, and the heartbeat's span. */
export interface CarryOverChannel {
  write(write: DenyWrite): Promise<DenyWriteResult>;
  prefix: string;
  liveMs: number;
}

/**
 * The carry-over of the denies 1.0 wrote (one key per tracker, `<prefix>:{<tracker>}:deny`, which 1.0's decisions
 * read and 1.1's do not) into the deny channel every instance polls. One instance at a time SCANs every master
 * and writes what it finds (never shortening a deny, never undoing a deny() or allow() made through the channel
 * since it began); the channel's marker then says when the next one is due: never again once a carry-over began
 * while no 1.0 instance was live (their heartbeats have no `/`), else {@link CARRY_OVER_EVERY_MS} later. So after
 * the first 1.1 instance starts, a deny made on a 1.0 instance reaches the 1.1 instances within about 11 s, and
 * the SCANs stop for good a minute after the last 1.0 instance stopped.
 */
export class DenyCarryOver {
  private readonly logger = new Logger('RateLimitDenyList');
  private readonly failed = new IntervalWarning('RateLimitDenyList', 60_000);
  private running: Promise<boolean> | undefined;
  /** Local ms before which no carry-over is tried again here. */
  private nextTryAt = -Infinity;
  private unsupported = false;

  constructor(
    private readonly store: RateLimitStore,
    private readonly channel: CarryOverChannel,
    private readonly clock: () => number,
  ) {}

  /** After a poll read `marker` ('' when one is due): starts a carry-over in the background when one is due. */
  due(marker: string): void {
    if (marker !== '' || this.running !== undefined || this.unsupported) return;
    if (this.clock() < this.nextTryAt) return;
    void this.now();
  }

  /**
   * Carries 1.0 deny keys over now, unless another instance did lately or the marker says none is due any more;
   * joins one already running here. Resolves true when it wrote a deny (a read then picks it up).
   */
  now(): Promise<boolean> {
    if (this.running === undefined) {
      this.nextTryAt = this.clock() + CARRY_OVER_EVERY_MS;
      this.running = this.run()
        .then(
          (count) => count > 0,
          (error: unknown) => {
            this.warn(error);
            return false;
          },
        )
        .finally(() => (this.running = undefined));
    }
    return this.running;
  }

  private async run(): Promise<number> {
    const { store, channel } = this;
    if (store.scanDenyKeys === undefined) return 0;
    const begin = await channel.write({ op: 'import-begin', everyMs: CARRY_OVER_EVERY_MS, liveMs: channel.liveMs });
    if (begin.status !== 0) return 0;
    let carried = 0;
    let refused = 0;
    const complete = await store.scanDenyKeys(channel.prefix, async (entries) => {
      for (let i = 0; i < entries.length; i += PER_WRITE) {
        const written = await channel.write({ op: 'import', since: begin.seq, entries: entries.slice(i, i + PER_WRITE) });
        carried += written.a;
        refused += Number(written.b);
      }
    });
    if (!complete) {
      this.unsupported = true;
      this.logger.warn(
        "1.0 deny keys cannot be carried over: this Redis Cluster client cannot send a call to each master (ioredis's Cluster can). Denies made by 1.0 instances apply only on 1.0 instances; deny() them again once the fleet runs 1.1.",
      );
      return 0;
    }
    await channel.write({ op: 'import-end', done: begin.a === 0 });
    if (refused > 0) {
      this.logger.warn(
        `${refused} deny keys of 1.0 were not carried over: the deny list holds the most it keeps, 100,000 denies in force.`,
      );
    }
    if (carried > 0) this.logger.log(`Carried ${carried} deny keys of 1.0 over into the deny list every instance holds.`);
    return carried;
  }

  private warn(error: unknown): void {
    const cause = (error as Error)?.message ?? String(error);
    this.failed.warn(`1.0 deny keys could not be carried over (${cause}); tried again within ${CARRY_OVER_EVERY_MS / 1000} s.`);
  }
}
