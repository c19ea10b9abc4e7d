/**
 * Kinds that share one lane before the next is taken. Two: the claim and the held transitions of
 * one endpoint's agents, which alternate, drained 3-10 % faster on one backend than on two
 * (docs/performance.md, "Two kinds to a lane"); more would queue busy kinds behind each other.
 */
export const KINDS_PER_LANE = 2;

/**
 * A few connections that batched statements of one kind keep to (Batches). A kind takes a lane
 * when its first run starts and gives it back when its last run ends; while it holds the lane,
 * every run of the kind goes there, so a second run is pipelined behind the first on the same
 * connection (PostgreSQL runs them one after the other, with no lock between them, and never waits
 * for the client in between) rather than racing it on another one.
 *
 * Kinds share a lane: a kind takes the first lane held by fewer than KINDS_PER_LANE kinds, and
 * only when every lane is that full the least held one (the first of equals). Under light load
 * every statement goes to the same connection and its warm backend, where a pool hands each
 * statement to the connection idle the longest; and an agent's loop, a claim then a completion
 * then a claim, keeps both its kinds on one backend instead of waking two in turn.
 * docs/performance.md (ingest, "lanes"; the claim path, "Two kinds to a lane") has the measurements.
 */
export class Lanes<L> {
  readonly #lanes: { lane: L; holders: number }[];

  constructor(lanes: readonly L[]) {
    if (lanes.length === 0) throw new Error('Lanes needs at least one lane');
    this.#lanes = lanes.map((lane) => ({ lane, holders: 0 }));
  }

  /** The first lane with room for another kind, else the least held (the first of equals); now held once more. */
  take(): L {
    let best = this.#lanes.find((l) => l.holders < KINDS_PER_LANE);
    if (!best) {
      best = this.#lanes[0]!;
      for (const l of this.#lanes) if (l.holders < best.holders) best = l;
    }
    best.holders++;
    return best.lane;
  }

  /** Gives back a lane that take() returned. */
  give(lane: L): void {
    const held = this.#lanes.find((l) => l.lane === lane);
    if (held && held.holders > 0) held.holders--;
  }
}
