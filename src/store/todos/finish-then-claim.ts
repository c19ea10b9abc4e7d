import { arg, compiledPer } from '../../db/compiled.ts';
import type { Sql } from '../../db/connect.ts';
import { Batches, gatheredRuns, type Waiting } from '../../lib/batches.ts';
import { Lanes } from '../../lib/lanes.ts';
import { acknowledgements, ackedRingsOf, type ClaimedTodo } from './claim.ts';
import { MAX_CLAIMS_PER_STATEMENT, claimNextCtes, wantedQueues } from './claim-next.ts';
import type { Caller } from './reach.ts';
import { todoMetaColumns, type TodoMetaRow } from './row.ts';
import { heldRefusal, heldRows, heldUpdate, type HeldCall } from './transitions.ts';

/** The transitions that may claim the next todo in the same statement. */
export type Finish = 'complete' | 'fail';

/** What the claim after a finish takes: claim_next's queues and lease, and the claimer's session and fence hash. */
export interface NextClaim {
  queues: readonly string[];
  leaseSecs: number;
  session: string | null;
  leaseTokenHash: string | null;
}

/** A finish's todo after it, and the todo claimed after it (null: none was claimable at once). */
export interface Finished {
  finished: TodoMetaRow;
  claimed: ClaimedTodo | null;
}

interface FinishArgs extends Record<string, unknown> {
  endpoint: string;
  owner: string;
  /** The caller's granted queues: where the finished todos may be. */
  reach: string[];
  /** JSON text of the finishes' rows (heldRows). */
  rows: string;
  /** JSON text of [{n, session, hash}]: each finish's claim, by its row's n. */
  claims: string;
  /** The queues the claims take from. */
  queues: string[];
  now: Date;
  lease: number;
}

/**
 * A finish and claim_next in one statement, for a number of calls and of queues: the finishes
 * (heldUpdate) and a claim for each call whose finish took, as claim_next would make it
 * (claimNextCtes, its acknowledgements included). Every CTE sees the statement's one snapshot, so
 * a todo being finished is still claimed in it, and one whose lease ran out would look claimable:
 * the finished todos are left out of the candidates (PostgreSQL's lock would also pass over a row
 * this statement already updated; the statement says so rather than lean on it). The claims are
 * seated in the order of their calls; a call whose finish was refused gets no seat, and a todo
 * picked for it is locked until the commit but not claimed.
 */
const finishThenClaimStatement = compiledPer<{ what: Finish; calls: number; queues: number }, FinishArgs>(
  (v) => `${v.what}/${v.calls}/${v.queues}`,
  (sql, { what, calls, queues }) => sql`
    with finished as (
      ${heldUpdate(sql, what, calls, { endpointId: arg('endpoint'), owner: arg('owner'), queues: arg('reach') })}
    ), ${claimNextCtes(sql, {
      queueCount: queues,
      seats: sql`(
        select c.session, c.hash, row_number() over (order by f.n) as seat
        from finished f join jsonb_to_recordset(${arg<string>('claims')}::text::jsonb) as c(n int, session text, hash text) using (n)
      ) as u`,
      upTo: calls,
      excluded: sql`select id from finished`,
    })}, ${acknowledgements(sql, arg<Date>('now'))}
    select 'claimed' as part, c.seat::int as n, ${sql.unsafe(todoMetaColumns('c'))}, c.payload, ${ackedRingsOf(sql, 'c')} as acked_rings
    from claimed c
    union all
    select 'finished', f.n, ${sql.unsafe(todoMetaColumns('f'))}, null::jsonb, '[]'::jsonb
    from finished f`,
);

type FinishRow = (TodoMetaRow | ClaimedTodo) & { part: 'claimed' | 'finished'; n: number };

interface FinishItem {
  caller: Caller;
  what: Finish;
  call: HeldCall;
  next: NextClaim & { wanted: string[] };
}

/**
 * complete or fail with `next`, for an instance's callers: the finish and the claim after it in
 * one statement, one round trip instead of two. Calls of the same finish, caller and claim
 * (queues, lease) go together as HeldTransitions' and ClaimNext's do (gatheredRuns), never two
 * on one todo. A refused finish gets the refusal a lone one gets and claims nothing; a finish
 * whose claim found nothing claimable at once answers `claimed: null`, for the caller to go on as
 * claim_next does (it looks again past locked rows, and may wait).
 */
export class FinishThenClaim {
  readonly #batches: Batches<FinishItem, Finished, Sql>;

  constructor(
    private readonly sql: Sql,
    lanes: Lanes<Sql> = new Lanes([sql]),
  ) {
    this.#batches = new Batches((calls, lane) => this.#run(calls, lane), { ...gatheredRuns(MAX_CLAIMS_PER_STATEMENT), distinct: ({ call }) => [call.id] }, lanes);
  }

  /** Null when there is no queue to claim from (only the reserved one): the caller finishes alone. */
  add(caller: Caller, what: Finish, call: HeldCall, next: NextClaim): Promise<Finished> | null {
    const wanted = wantedQueues(next.queues);
    if (wanted.length === 0) return null;
    const kind = JSON.stringify([what, caller.endpointId, caller.owner, caller.queues, wanted, next.leaseSecs]);
    return this.#batches.add(kind, { caller, what, call, next: { ...next, wanted } });
  }

  async #run(calls: Waiting<FinishItem, Finished>[], lane: Sql): Promise<void> {
    const { caller, what, next } = calls[0]!.item;
    const now = new Date(Math.max(...calls.map((c) => c.item.call.now.getTime())));
    const rows = await finishThenClaimStatement(lane, { what, calls: calls.length, queues: next.wanted.length }).run<FinishRow>(lane, {
      endpoint: caller.endpointId,
      owner: caller.owner,
      reach: [...caller.queues],
      rows: heldRows(calls.map((c) => c.item.call)),
      claims: JSON.stringify(calls.map((c, i) => ({ n: i + 1, session: c.item.next.session, hash: c.item.next.leaseTokenHash }))),
      queues: next.wanted,
      now,
      lease: next.leaseSecs,
    });
    const finished: (TodoMetaRow | undefined)[] = new Array(calls.length);
    const seats: ClaimedTodo[] = [];
    for (const { part, n, ...row } of rows) {
      if (part === 'finished') finished[n - 1] = row as TodoMetaRow;
      else seats[n - 1] = row as ClaimedTodo;
    }
    // Claim seat k went to the k-th call, in call order, whose finish took.
    let seat = 0;
    calls.forEach(({ item, resolve, reject }, i) => {
      const row = finished[i];
      if (row) resolve({ finished: row, claimed: seats[seat++] ?? null });
      else heldRefusal(this.sql, caller, item.call.id, what).then(reject, reject);
    });
  }
}
