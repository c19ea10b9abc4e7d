import type { Sql } from '../../db/connect.ts';
import { Batches, gatheredRuns, type Waiting } from '../../lib/batches.ts';
import { Lanes } from '../../lib/lanes.ts';
import type { Caller } from './reach.ts';
import type { TodoMetaRow } from './row.ts';
import { heldRefusal, transitionHeldTodos, type HeldCall, type Transition } from './transitions.ts';

/** The most calls one heartbeat, complete, fail or release statement takes for the calls that waited. */
export const MAX_TRANSITIONS_PER_STATEMENT = 16;

interface HeldItem {
  caller: Caller;
  what: Transition;
  call: HeldCall;
}

/**
 * Heartbeat, complete, fail and release for an instance's callers. A call with none of its kind
 * running goes to the database on the event loop's next turn, with every call of its kind made
 * in this turn; the calls of the same transition and caller (endpoint, owner, queues) that arrive
 * while it runs wait for it and then go together in one statement (up to
 * MAX_TRANSITIONS_PER_STATEMENT; once half that many wait, that statement is sent behind the one
 * going, on the kind's lane: gatheredRuns), each checked against its own todo,
 * fence and time as it would be alone. Two calls on one todo never share a statement: the later finds what
 * the first left, as it would have. A call whose todo the caller did not hold gets the refusal a
 * lone call gets.
 */
export class HeldTransitions {
  readonly #batches: Batches<HeldItem, TodoMetaRow, Sql>;

  constructor(
    private readonly sql: Sql,
    /** Where the statements go (src/lib/lanes.ts); by default the pool. */
    lanes: Lanes<Sql> = new Lanes([sql]),
  ) {
    this.#batches = new Batches((calls, lane) => this.#run(calls, lane), { ...gatheredRuns(MAX_TRANSITIONS_PER_STATEMENT), distinct: ({ call }) => [call.id] }, lanes);
  }

  heartbeat(caller: Caller, call: HeldCall & { lease: number }): Promise<TodoMetaRow> {
    return this.#add(caller, 'heartbeat', call);
  }

  complete(caller: Caller, call: HeldCall): Promise<TodoMetaRow> {
    return this.#add(caller, 'complete', call);
  }

  fail(caller: Caller, call: HeldCall): Promise<TodoMetaRow> {
    return this.#add(caller, 'fail', call);
  }

  release(caller: Caller, call: HeldCall): Promise<TodoMetaRow> {
    return this.#add(caller, 'release', call);
  }

  #add(caller: Caller, what: Transition, call: HeldCall): Promise<TodoMetaRow> {
    const kind = JSON.stringify([what, caller.endpointId, caller.owner, caller.queues]);
    return this.#batches.add(kind, { caller, what, call });
  }

  async #run(calls: Waiting<HeldItem, TodoMetaRow>[], lane: Sql): Promise<void> {
    const { caller, what } = calls[0]!.item;
    const rows = await transitionHeldTodos(lane, caller, what, calls.map((c) => c.item.call));
    calls.forEach(({ item, resolve, reject }, i) => {
      const row = rows[i];
      if (row) resolve(row);
      else heldRefusal(this.sql, caller, item.call.id, what).then(reject, reject);
    });
  }
}
