/**
 * Calls that wait while a statement of their kind runs, then go to the database together. A call
 * with nothing of its kind running is run at once, alone, so a lone caller waits for nobody; the
 * calls of the same kind that arrive meanwhile wait for it and then go in one run of up to
 * `perRun`. Under load that spends one statement's fixed cost (its round trip, its commit, its
 * executor set-up) on several calls. claim_next and the delivery insert run through one each.
 */
export interface Waiting<Item, Result> {
  readonly item: Item;
  resolve(result: Result | PromiseLike<Result>): void;
  reject(err: unknown): void;
}

export interface BatchLimits<Item> {
  /** The most calls one run takes. */
  perRun: number;
  /** Runs of one kind at once (1: a kind's calls queue behind its one running statement). */
  atOnce: number;
  /**
   * Keys no two calls of one run may share (a statement cannot write one unique key twice): a
   * call whose key is already taken waits for the next run, in its order. Absent: none.
   */
  distinct?: (item: Item) => readonly (string | null)[];
}

export class Batches<Item, Result> {
  /** Per kind, the calls waiting and the runs in progress (no entry: none of either). */
  readonly #kinds = new Map<string, { waiting: Waiting<Item, Result>[]; running: number }>();

  constructor(
    /**
     * Settles every call of the run it is given, or throws before settling any (its statement
     * failed). A run of several that throws is not the end of its calls: each goes again in a run
     * of its own, so one call PostgreSQL refuses (a value it cannot store) fails alone.
     */
    private readonly run: (calls: Waiting<Item, Result>[]) => Promise<void>,
    private readonly limits: BatchLimits<Item>,
  ) {}

  add(kindKey: string, item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      let kind = this.#kinds.get(kindKey);
      if (!kind) this.#kinds.set(kindKey, (kind = { waiting: [], running: 0 }));
      kind.waiting.push({ item, resolve, reject });
      if (kind.running < this.limits.atOnce) void this.#drain(kindKey, kind);
    });
  }

  async #drain(kindKey: string, kind: { waiting: Waiting<Item, Result>[]; running: number }): Promise<void> {
    kind.running++;
    try {
      while (kind.waiting.length > 0) {
        const calls = this.#take(kind.waiting);
        if (calls.length === 1) await this.#runAlone(calls[0]!);
        else await this.run(calls).catch(async () => {
          for (const call of calls) await this.#runAlone(call);
        });
      }
    } finally {
      kind.running--;
      if (kind.running === 0 && kind.waiting.length === 0) this.#kinds.delete(kindKey);
    }
  }

  async #runAlone(call: Waiting<Item, Result>): Promise<void> {
    await this.run([call]).catch((err: unknown) => call.reject(err));
  }

  /** The next run's calls, in arrival order, removed from `waiting`. */
  #take(waiting: Waiting<Item, Result>[]): Waiting<Item, Result>[] {
    const { perRun, distinct } = this.limits;
    if (!distinct) return waiting.splice(0, perRun);
    const taken: Waiting<Item, Result>[] = [];
    const left: Waiting<Item, Result>[] = [];
    const keys = new Set<string>();
    for (const call of waiting) {
      const own = distinct(call.item).filter((k): k is string => k !== null);
      if (taken.length >= perRun || own.some((k) => keys.has(k))) {
        left.push(call);
        continue;
      }
      for (const k of own) keys.add(k);
      taken.push(call);
    }
    waiting.splice(0, waiting.length, ...left);
    return taken;
  }
}
