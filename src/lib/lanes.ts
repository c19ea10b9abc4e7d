/**
 * A few connections that batched statements of one kind keep to (Batches). A kind takes a lane
 * when its first run starts and gives it back when its last run ends; while it holds the lane,
 * every run of the kind goes there, so a second run is pipelined behind the first on the same
 * connection (PostgreSQL runs them one after the other, with no lock between them, and never waits
 * for the client in between) rather than racing it on another one.
 *
 * A kind that finds none held takes the least taken lane, the first of equals: under light load
 * every statement goes to the same connection and its warm backend, where a pool hands each
 * statement to the connection idle the longest. docs/performance.md (ingest, "lanes") has the
 * measurements.
 */
export class Lanes<L> {
  readonly #lanes: { lane: L; holders: number }[];

  constructor(lanes: readonly L[]) {
    if (lanes.length === 0) throw new Error('Lanes needs at least one lane');
    this.#lanes = lanes.map((lane) => ({ lane, holders: 0 }));
  }

  /** The least held lane (the first of equals), now held once more. */
  take(): L {
    let best = this.#lanes[0]!;
    for (const l of this.#lanes) if (l.holders < best.holders) best = l;
    best.holders++;
    return best.lane;
  }

  /** Gives back a lane that take() returned. */
  give(lane: L): void {
    const held = this.#lanes.find((l) => l.lane === lane);
    if (held && held.holders > 0) held.holders--;
  }
}
