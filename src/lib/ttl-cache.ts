import type { Clock } from './clock.ts';

/**
 * A small map whose entries expire `ttlMs` after they were set (by the injected clock) and which
 * holds at most `maxEntries` (the oldest set goes first). For lookups that an explicit
 * invalidation keeps right; the expiry is the safety net should an invalidation be missed.
 */
export class TtlCache<K, V> {
  readonly #entries = new Map<K, { value: V; at: number }>();

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

  delete(key: K): void {
    this.#entries.delete(key);
  }

  /** Drops every entry whose value matches. */
  deleteWhere(matches: (value: V) => boolean): void {
    for (const [k, e] of this.#entries) if (matches(e.value)) this.#entries.delete(k);
  }

  clear(): void {
    this.#entries.clear();
  }

  get size(): number {
    return this.#entries.size;
  }
}
