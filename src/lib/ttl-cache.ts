import type { Clock } from './clock.ts';

/**
 * A small map whose entries expire `ttlMs` after they were set (by the injected clock) and which
 * holds at most `maxEntries` (the oldest set goes first). For lookups that an explicit
 * invalidation keeps right; the expiry is the safety net should an invalidation be missed.
 *
 * A value loaded while an invalidation ran may already be stale: take `mark()` before the load
 * and store the result with `setUnlessDropped(mark, ...)`, which skips it if anything was dropped
 * (delete, deleteWhere, clear) since.
 */
export class TtlCache<K, V> {
  readonly #entries = new Map<K, { value: V; at: number }>();
  #drops = 0;

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: K): V | undefined {
    const e = this.#entries.get(key);
    if (!e) return undefined;
    if (this.clock.now().getTime() - e.at >= this.ttlMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return e.value;
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, at: this.clock.now().getTime() });
    if (this.#entries.size > this.maxEntries) this.#entries.delete(this.#entries.keys().next().value as K);
  }

  /** How many invalidations have run: pass it to setUnlessDropped after a load. */
  mark(): number {
    return this.#drops;
  }

  /** Sets the entry unless an invalidation ran since `mark` (the value may predate it). */
  setUnlessDropped(mark: number, key: K, value: V): void {
    if (mark === this.#drops) this.set(key, value);
  }

  delete(key: K): void {
    this.#drops++;
    this.#entries.delete(key);
  }

  /** Drops every entry whose value matches. */
  deleteWhere(matches: (value: V) => boolean): void {
    this.#drops++;
    for (const [k, e] of this.#entries) if (matches(e.value)) this.#entries.delete(k);
  }

  clear(): void {
    this.#drops++;
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }
}
