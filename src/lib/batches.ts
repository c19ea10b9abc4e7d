import { Lanes } from './lanes.ts';

/**
 * Calls that wait while a statement of their kind runs, then go to the database together. A call
 * with nothing of its kind running is run at once, alone, so a lone caller waits for nobody (or,
 * with `gather`, on the event loop's next turn with every call of its kind made in this one); the
 * calls of the same kind that arrive meanwhile wait for it and then go in one run of up to
 * `perRun`. Under load that spends one statement's fixed cost (its round trip, its commit, its
 * executor set-up) on several calls. claim_next, the held transitions and the delivery insert run
 * through one each. Every run of a kind goes to the lane the kind holds (Lanes).
 */
export interface Waiting<Item, Result> {
  readonly item: Item;
  resolve(result: Result | PromiseLike<Result>): void;
  reject(err: unknown): void;
}

export interface BatchLimits<Item> {
  /** The most calls one run takes. */
  perRun: number;
  /**
   * Runs of one kind at once, all on the kind's lane (1: a kind's calls queue behind its one
   * running statement; 2: the next run is sent behind it on the same connection).
   */
  atOnce: number;
  /**
   * While a run of the kind is going, a further one starts only when at least this many calls
   * wait (default 1): a run sent early with two calls would spend a statement on what the next
   * one takes for free.
   */
  moreAt?: number;
  /**
   * Keys no two calls of one run may share (a statement cannot write one unique key twice): a
   * call whose key is already taken waits for the next run, in its order. Absent: none.
   */
  distinct?: (item: Item) => readonly (string | null)[];
  /**
   * A kind's first run waits for the event loop's next turn (setImmediate) and takes every call of
   * the kind made in this one: the callers one I/O phase woke, or the workers of one process
   * asking at once. Absent: the first call goes at once, alone.
   */
  gather?: boolean;
}

/**
 * Runs as the store sends them on its lanes: up to `perRun` calls each, and a second run of a kind
 * pipelined behind the one going once half a run waits (docs/performance.md, ingest, "lanes").
 */
export const pipelinedRuns = (perRun: number): Omit<BatchLimits<unknown>, 'distinct'> => ({ perRun, atOnce: 2, moreAt: Math.ceil(perRun / 2) });

/**
 * The claim path's runs (claim_next, the held transitions): pipelinedRuns, and each kind's first
 * run gathers the calls of its turn. Eight workers of one process draining one endpoint went from
 * 0.76 statements per job to 0.25, and from 0.43-0.54 ms of CPU per job to 0.26
 * (docs/performance.md, "A turn's claims go together").
 */
export const gatheredRuns = (perRun: number): Omit<BatchLimits<unknown>, 'distinct'> => ({ ...pipelinedRuns(perRun), gather: true });

/** One kind's calls waiting, its runs in progress and, while any is, the lane they go to. */
interface Kind<Item, Result, L> {
  waiting: Waiting<Item, Result>[];
  running: number;
  /** A first run is due on the event loop's next turn. */
  gathering: boolean;
  lane: L;
}

export class Batches<Item, Result, L = undefined> {
  /** Per kind with calls waiting or running (no entry: none of either). */
  readonly #kinds = new Map<string, Kind<Item, Result, L>>();

  constructor(
    /**
     * Settles every call of the run it is given, or throws before settling any (its statement
     * failed). A run of several that throws is not the end of its calls: each goes again in a run
     * of its own, so one call PostgreSQL refuses (a value it cannot store) fails alone.
     */
    private readonly run: (calls: Waiting<Item, Result>[], lane: L) => Promise<void>,
    private readonly limits: BatchLimits<Item>,
    private readonly lanes: Lanes<L> = new Lanes([undefined as L]),
  ) {}

  add(kindKey: string, item: Item): Promise<Result> {
    return new Promise<Result>((resolve, reject) => {
      let kind = this.#kinds.get(kindKey);
      if (!kind) this.#kinds.set(kindKey, (kind = { waiting: [], running: 0, gathering: false, lane: this.lanes.take() }));
      kind.waiting.push({ item, resolve, reject });
      if (kind.running === 0 && this.limits.gather) this.#gather(kindKey, kind);
      else if (kind.running === 0 || (kind.running < this.limits.atOnce && kind.waiting.length >= this.#moreAt)) void this.#drain(kindKey, kind);
    });
  }

  /** With `gather`: the kind's first run, started once on the event loop's next turn. */
  #gather(kindKey: string, kind: Kind<Item, Result, L>): void {
    if (kind.gathering) return;
    kind.gathering = true;
    setImmediate(() => {
      kind.gathering = false;
      void this.#drain(kindKey, kind);
    });
  }

  get #moreAt(): number {
    return this.limits.moreAt ?? 1;
  }

  async #drain(kindKey: string, kind: Kind<Item, Result, L>): Promise<void> {
    kind.running++;
    try {
      // The last run going takes whatever waits; one beside it goes on only for a full enough run.
      while (kind.waiting.length >= (kind.running === 1 ? 1 : this.#moreAt)) {
        const calls = this.#take(kind.waiting);
        if (calls.length === 1) await this.#runAlone(calls[0]!, kind.lane);
        else await this.run(calls, kind.lane).catch(async () => {
          for (const call of calls) await this.#runAlone(call, kind.lane);
        });
      }
    } finally {
      kind.running--;
      if (kind.running === 0 && kind.waiting.length === 0) {
        this.#kinds.delete(kindKey);
        this.lanes.give(kind.lane);
      }
    }
  }

  async #runAlone(call: Waiting<Item, Result>, lane: L): Promise<void> {
    await this.run([call], lane).catch((err: unknown) => call.reject(err));
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
