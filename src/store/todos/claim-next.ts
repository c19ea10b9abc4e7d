import { arg, compiledPer } from '../../db/compiled.ts';
import type { Fragment, Sql } from '../../db/connect.ts';
import { Batches, gatheredRuns, type Waiting } from '../../lib/batches.ts';
import { Lanes } from '../../lib/lanes.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';
import { claimSet, withAcknowledgements, type ClaimedTodo } from './claim.ts';
import { claimable, claimableStates } from './predicates.ts';
import type { Caller } from './reach.ts';

/**
 * Claims the next claimable todo across the caller's queues (highest priority first, then the
 * oldest), or returns null when none is. A self-test (synthetic) todo is never handed out
 * (SPEC-0025 REQ-9): only a claim by id proves its doorbell was heard. This is one claim on its own; an
 * instance claims through ClaimNext (below), whose statements take the claims that waited together.
 *
 * The candidates come in that order from one ordered index scan per queue over the due pending
 * rows (todos_claim_scan_idx), merged with the few delayed todos come due that the reaper has not
 * released yet, expired leases and due retries; each candidate is
 * then locked, skipping rows another claimer holds, until one is taken. A single scan of every
 * claimable state could use no index in that order: it walked the endpoint's whole history
 * (done todos included) or sorted all its pending rows on every claim, which grew with the queue.
 * The lock re-checks the claimable condition, so a row claimed meanwhile is passed over; a todo's
 * endpoint, queue and synthetic flag never change once inserted, so the scans' check of those
 * stands, and leaving them out of the lock's lookup keeps it on the primary key in every plan
 * (a generic plan made while the table was small once chose an endpoint index there instead).
 */
export async function claimNextTodo(
  sql: Sql,
  caller: Caller,
  queues: readonly string[],
  leaseSecs: number,
  now: Date,
  leaseTokenHash: string | null = null,
): Promise<ClaimedTodo | null> {
  const wanted = wantedQueues(queues);
  if (wanted.length === 0) return null;
  const [row] = await runClaimNext(sql, caller, wanted, leaseSecs, now, [{ session: caller.sessionId ?? null, hash: leaseTokenHash }]);
  return row ?? lookAgain(sql, caller, wanted, leaseSecs, now, leaseTokenHash);
}

/**
 * After a claim that took nothing. Every candidate may have been locked: another claimer's lock
 * ends with the row no longer claimable, but a short non-claim update (a digest marking the todos
 * it counted as rung) leaves it claimable, so while anything is claimable the claim runs again,
 * alone, rather than answer "empty" to an agent that was just woken.
 */
async function lookAgain(
  sql: Sql,
  caller: Caller,
  wanted: string[],
  leaseSecs: number,
  now: Date,
  leaseTokenHash: string | null,
  attempt = 0,
): Promise<ClaimedTodo | null> {
  if (attempt >= CLAIM_LOCK_RETRIES || !(await anyClaimable(sql, caller, wanted, now))) return null;
  await new Promise((resolve) => setTimeout(resolve, 10 * (attempt + 1)));
  const [row] = await runClaimNext(sql, caller, wanted, leaseSecs, now, [{ session: caller.sessionId ?? null, hash: leaseTokenHash }]);
  return row ?? lookAgain(sql, caller, wanted, leaseSecs, now, leaseTokenHash, attempt + 1);
}

export const wantedQueues = (queues: readonly string[]): string[] => [...new Set(queues)].filter((q) => q !== RESERVED_QUEUE);

/** One claim of a statement that takes several: the session that claims and its fence's hash. */
interface ClaimSeat {
  session: string | null;
  hash: string | null;
}

/**
 * Runs claim_next's statement for `seats.length` claims at once (one caller's endpoint, owner,
 * queues and lease). Each claimed row is that seat's (`[i]` is seat i's todo, or undefined when
 * the statement took fewer todos than it had seats).
 */
async function runClaimNext(
  sql: Sql,
  caller: Caller,
  wanted: string[],
  leaseSecs: number,
  now: Date,
  seats: ClaimSeat[],
): Promise<(ClaimedTodo | undefined)[]> {
  const args: ClaimNextArgs = {
    endpoint: caller.endpointId,
    owner: caller.owner,
    sessions: seats.map((s) => s.session),
    hashes: seats.map((s) => s.hash),
    queues: wanted,
    now,
    lease: leaseSecs,
  };
  const rows = await claimNextStatement(sql, { queues: wanted.length, seats: seats.length }).run<ClaimedTodo & { seat: string }>(sql, args);
  const bySeat: (ClaimedTodo | undefined)[] = new Array(seats.length);
  for (const { seat, ...row } of rows) bySeat[Number(seat) - 1] = row;
  return bySeat;
}

/** The most claims one claim_next statement takes for the calls that waited while one ran. */
export const MAX_CLAIMS_PER_STATEMENT = 8;

interface WaitingClaim extends ClaimSeat {
  caller: Caller;
  wanted: string[];
  leaseSecs: number;
  now: Date;
}

/**
 * claim_next for an instance's callers. A claim with none of its kind running goes to the
 * database on the event loop's next turn, with every claim of its kind made in this turn
 * (gatheredRuns); the claims of the same endpoint, owner, queues and lease that arrive
 * while it runs wait for it and then go together in one statement (up to
 * MAX_CLAIMS_PER_STATEMENT; once half that many wait, that statement is sent behind the one
 * going, on the kind's lane: gatheredRuns), each with its own session, fence and
 * acknowledgements. Under load that spends one statement's fixed cost and one pass over the head
 * of the queue on several claims instead of each claimer fighting the others for the same first
 * rows. A claim its batch
 * had no todo for looks again alone (lookAgain), so it answers "empty" only as a lone claim would.
 */
export class ClaimNext {
  readonly #batches: Batches<WaitingClaim, ClaimedTodo | null, Sql>;

  constructor(
    private readonly sql: Sql,
    /** Where the statements go (src/lib/lanes.ts); by default the pool. */
    lanes: Lanes<Sql> = new Lanes([sql]),
  ) {
    this.#batches = new Batches((calls, lane) => this.#claimFor(calls, lane), gatheredRuns(MAX_CLAIMS_PER_STATEMENT), lanes);
  }

  claim(caller: Caller, queues: readonly string[], leaseSecs: number, now: Date, leaseTokenHash: string | null = null): Promise<ClaimedTodo | null> {
    const wanted = wantedQueues(queues);
    if (wanted.length === 0) return Promise.resolve(null);
    const kind = JSON.stringify([caller.endpointId, caller.owner, leaseSecs, wanted]);
    return this.#batches.add(kind, { caller, wanted, leaseSecs, now, session: caller.sessionId ?? null, hash: leaseTokenHash });
  }

  async #claimFor(calls: Waiting<WaitingClaim, ClaimedTodo | null>[], lane: Sql): Promise<void> {
    const { caller, wanted, leaseSecs } = calls[0]!.item;
    const now = new Date(Math.max(...calls.map((c) => c.item.now.getTime())));
    const rows = await runClaimNext(lane, caller, wanted, leaseSecs, now, calls.map((c) => c.item));
    calls.forEach(({ item, resolve }, i) => {
      const row = rows[i];
      resolve(row ?? lookAgain(this.sql, item.caller, wanted, leaseSecs, item.now, item.hash));
    });
  }
}

/**
 * Candidates taken from each branch, in claim order. The limit is what lets the planner walk
 * todos_claim_scan_idx in order and stop: a branch planned to return every row is cheaper, by
 * total cost, as a sequential scan and a sort of the whole pending queue, which made each claim
 * cost O(queue) once the statistics knew the queue was large. More claimers than this holding locks on
 * one endpoint's candidates at once fall through to claim_next's look-again.
 */
const CLAIM_CANDIDATES = 32;

interface ClaimNextArgs extends Record<string, unknown> {
  /** The queues to claim from, each scanned by its own branch (by position) and the rest by `any`. */
  endpoint: string;
  owner: string;
  /** Per seat, in order: the claiming session and its fence's hash. */
  sessions: (string | null)[];
  hashes: (string | null)[];
  queues: string[];
  now: Date;
  lease: number;
}

/** claim_next's statement for a number of queues and of seats, composed once (src/db/compiled.ts). */
const claimNextStatement = compiledPer<{ queues: number; seats: number }, ClaimNextArgs>(
  (v) => `${v.queues}/${v.seats}`,
  (sql, { queues, seats }) =>
    sql`
      with ${claimNextCtes(sql, {
        queueCount: queues,
        seats: sql`unnest(${arg<string[]>('sessions')}::text[], ${arg<string[]>('hashes')}::text[]) with ordinality as u(session, hash, seat)`,
        upTo: seats,
      })}, ${withAcknowledgements(sql, arg<Date>('now'))}`,
);

/**
 * claim_next's CTEs, ending with `claimed` (the claimed rows, `t.*` and their `seat`), for a
 * statement composed with the args of ClaimNextArgs but `sessions` and `hashes`: `seats` is a from
 * item of the claims' (session, hash, seat), seats numbered from 1 in claim order, and `upTo` how
 * many todos to take at most. `excluded` (a query of ids) is left out of the candidates.
 */
export function claimNextCtes(sql: Sql, opts: { queueCount: number; seats: Fragment; upTo: number; excluded?: Fragment }): Fragment {
  // A literal, as the candidates' limit is.
  const upTo = sql.unsafe(String(opts.upTo));
  const now = arg<Date>('now');
  const caller: Caller = { endpointId: arg('endpoint'), owner: arg('owner'), queues: [] };
  const eligible = sql`endpoint_id = ${caller.endpointId} and not synthetic and (assignee is null or assignee = ${caller.owner})`;
  const states = claimableStates(sql, now);
  const cols = sql`id, priority, created_at, seq`;
  const queues = arg<string[]>('queues');
  const inWanted = sql`queue = any(${queues}::text[])`;
  // A literal, not a parameter: a generic plan guesses a parameter limit at a tenth of the rows.
  const first = sql`order by priority desc, created_at, seq limit ${sql.unsafe(String(CLAIM_CANDIDATES))}`;
  const branches = [
    ...Array.from(
      { length: opts.queueCount },
      (_, i) => sql`(select ${cols} from todos where ${eligible} and queue = (${queues}::text[])[${sql.unsafe(String(i + 1))}] and ${states.pending} ${first})`,
    ),
    sql`(select ${cols} from todos where ${eligible} and ${inWanted} and ${states.dueDelay} ${first})`,
    sql`(select ${cols} from todos where ${eligible} and ${inWanted} and ${states.expiredLease} ${first})`,
    sql`(select ${cols} from todos where ${eligible} and ${inWanted} and ${states.dueRetry} ${first})`,
  ];
  const candidates = branches.reduce((all, b) => sql`${all} union all ${b}`);
  const notExcluded = opts.excluded ? sql`and t.id not in (${opts.excluded})` : sql``;
  // Seat i takes the i-th todo picked.
  return sql`
    picked as materialized (
      select l.id from (${candidates}) c
      cross join lateral (
        select t.id from todos t where t.id = c.id ${notExcluded} and ${claimable(sql, caller.owner, now)}
        for update skip locked
      ) l
      order by c.priority desc, c.created_at, c.seq
      limit ${upTo}
    ), seated as (
      select p.id, u.session, u.hash, u.seat
      from (select id, row_number() over () as seat from picked) p
      join ${opts.seats} using (seat)
    ), claimed as (
      update todos t set ${claimSet(sql, caller.owner, sql`s.session`, sql`s.hash`, now, arg<number>('lease'))}
      from seated s where t.id = s.id
      returning t.*, s.seat
    )`;
}

/** How many times claim_next looks again (after 10, 20, 30 ms) when it skipped only rows locked by someone else. */
const CLAIM_LOCK_RETRIES = 3;

async function anyClaimable(sql: Sql, caller: Caller, queues: readonly string[], now: Date): Promise<boolean> {
  // One `exists` per way a todo can be claimable, each shaped like the claim's own branch for its
  // partial index (claimNextCtes). As one `exists` over `claimable`, a generic plan guessed half the
  // table would match and read all of todos when nothing did: 58 ms at 203,000 rows, 0.6-1.4 s on
  // a busy database for every claim_next that found its queue empty (bench:instances).
  const eligible = sql`endpoint_id = ${caller.endpointId} and not synthetic and (assignee is null or assignee = ${caller.owner})`;
  const states = claimableStates(sql, now);
  const inWanted = sql`queue = any(${sql.array([...queues])}::text[])`;
  const ways = [
    // The first in the claim's order, so the plan walks todos_claim_scan_idx and stops there (the
    // planner drops an order inside `exists`, and then a plan expecting an early match scans the table).
    ...queues.map(
      (queue) => sql`(select true from todos where ${eligible} and queue = ${queue} and ${states.pending} order by priority desc, created_at, seq limit 1) is not null`,
    ),
    sql`exists (select 1 from todos where ${eligible} and ${inWanted} and ${states.dueDelay})`,
    sql`exists (select 1 from todos where ${eligible} and ${inWanted} and ${states.expiredLease})`,
    sql`exists (select 1 from todos where ${eligible} and ${inWanted} and ${states.dueRetry})`,
  ];
  const [row] = await sql<{ any: boolean }[]>`select ${ways.reduce((all, way) => sql`${all} or ${way}`)} as any`;
  return row?.any ?? false;
}
