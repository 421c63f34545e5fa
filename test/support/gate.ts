import { Injectable } from '@nestjs/common';

/** Lets a test decide when gated handlers finish, and counts how many are inside. */
@Injectable()
export class Gate {
  inside = 0;
  private opened!: Promise<void>;
  private open!: () => void;

  constructor() {
    this.close();
  }

  /** Handlers that pass from now on wait for the next `release()`. */
  close(): void {
    this.opened = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open();
  }

  async pass(): Promise<void> {
    this.inside++;
    try {
      await this.opened;
    } finally {
      this.inside--;
    }
  }
}
