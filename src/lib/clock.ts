/** Everything that depends on time reads it from a Clock, so tests can move time instead of sleeping. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  #ms: number;
  constructor(start: Date | string = '2026-01-05T09:00:00Z') {
    this.#ms = new Date(start).getTime();
  }
  now(): Date {
    return new Date(this.#ms);
  }
  advance(ms: number): Date {
    this.#ms += ms;
    return this.now();
  }
  set(at: Date | string): void {
    this.#ms = new Date(at).getTime();
  }
}
