import type { Clock } from '../../lib/clock.ts';

/**
 * Remembers keys for a while: `first(key)` is true only if the key was not seen within the TTL.
 * It absorbs double fires (a creation ring and its own LISTEN echo) while letting a todo that
 * becomes ready again minutes later ring again.
 */
export class DoorbellGate {
  readonly #seen = new Map<string, number>();
  #lastPrune = 0;

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number,
  ) {}

  first(key: string): boolean {
    const now = this.clock.now().getTime();
    this.#prune(now);
    const at = this.#seen.get(key);
    if (at !== undefined && now - at < this.ttlMs) return false;
    this.#seen.set(key, now);
    return true;
  }

  /** Lets the key through again (its ring could not be decided, so a later fire may try). */
  forget(key: string): void {
    this.#seen.delete(key);
  }

  #prune(now: number): void {
    if (now - this.#lastPrune < this.ttlMs) return;
    this.#lastPrune = now;
    for (const [k, at] of this.#seen) if (now - at >= this.ttlMs) this.#seen.delete(k);
  }
}
