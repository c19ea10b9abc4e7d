import { arg, compiledPer } from '../../db/compiled.ts';
import type { Sql } from '../../db/connect.ts';
import { RESERVED_QUEUE } from '../../domain/scope.ts';
import { claimSet, ownSelfTest, selfTestRinging, withAcknowledgements, type ClaimedTodo } from './claim.ts';
import { claimable, claimableStates } from './predicates.ts';
import type { Caller } from './reach.ts';

/**
 * Claims the next claimable todo across the caller's queues (highest priority first, then the
 * oldest), or returns null when none is. A self-test todo whose doorbell rang comes first: its
 * claim completes it (claimSet), in the same one statement.
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
  attempt = 0,
): Promise<ClaimedTodo | null> {
  const wanted = [...new Set(queues)].filter((q) => q !== RESERVED_QUEUE);
  if (wanted.length === 0) return null;
  const args: ClaimNextArgs = {
    endpoint: caller.endpointId,
    owner: caller.owner,
    session: caller.sessionId ?? null,
    queues: wanted,
    now,
    lease: leaseSecs,
    hash: leaseTokenHash,
  };
  const [row] = await claimNextStatement(sql, wanted.length).run<ClaimedTodo>(sql, args);
  if (row) return row;
  // Every candidate was locked. Another claimer's lock ends with the row no longer claimable,
  // but a short non-claim update (a digest marking the todos it counted as rung) leaves it
  // claimable: look again rather than answer "empty" to an agent that was just woken.
  if (attempt < CLAIM_LOCK_RETRIES && (await anyClaimable(sql, caller, wanted, now))) {
    await new Promise((resolve) => setTimeout(resolve, 10 * (attempt + 1)));
    return claimNextTodo(sql, caller, queues, leaseSecs, now, leaseTokenHash, attempt + 1);
  }
  return null;
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
  session: string | null;
  queues: string[];
  now: Date;
  lease: number;
  hash: string | null;
}

/** claim_next's statement for a given number of queues, composed once (src/db/compiled.ts). */
const claimNextStatement = compiledPer<number, ClaimNextArgs>((queueCount) => queueCount, (sql, queueCount) => {
  const now = arg<Date>('now');
  const caller: Caller = { endpointId: arg('endpoint'), owner: arg('owner'), sessionId: arg('session'), queues: [] };
  const eligible = sql`endpoint_id = ${caller.endpointId} and not synthetic and (assignee is null or assignee = ${caller.owner})`;
  const states = claimableStates(sql, now);
  const cols = sql`id, priority, created_at, seq`;
  const queues = arg<string[]>('queues');
  const inWanted = sql`queue = any(${queues}::text[])`;
  // A literal, not a parameter: a generic plan guesses a parameter limit at a tenth of the rows.
  const first = sql`order by priority desc, created_at, seq limit ${sql.unsafe(String(CLAIM_CANDIDATES))}`;
  const branches = [
    ...Array.from(
      { length: queueCount },
      (_, i) => sql`(select ${cols} from todos where ${eligible} and queue = (${queues}::text[])[${sql.unsafe(String(i + 1))}] and ${states.pending} ${first})`,
    ),
    sql`(select ${cols} from todos where ${eligible} and ${inWanted} and ${states.dueDelay} ${first})`,
    sql`(select ${cols} from todos where ${eligible} and ${inWanted} and ${states.expiredLease} ${first})`,
    sql`(select ${cols} from todos where ${eligible} and ${inWanted} and ${states.dueRetry} ${first})`,
  ];
  const candidates = branches.reduce((all, b) => sql`${all} union all ${b}`);
  // The endpoint's ringing self-test comes before real work; when there is one, the limit stops
  // the append before the real candidates are scanned or locked.
  return sql`
    with own_test as materialized (
      select t.id from todos t where ${ownSelfTest(sql, caller, selfTestRinging(sql, now), queues, now)}
      for update skip locked
    ), picked as materialized (
      (select id from own_test)
      union all
      (select l.id from (${candidates}) c
       cross join lateral (
         select t.id from todos t where t.id = c.id and ${claimable(sql, caller.owner, now)}
         for update skip locked
       ) l
       order by c.priority desc, c.created_at, c.seq
       limit 1)
      limit 1
    ), claimed as (
      update todos t set ${claimSet(sql, caller, now, arg<number>('lease'), arg<string | null>('hash'))}
      from picked where t.id = picked.id
      returning t.*
    ), ${withAcknowledgements(sql, caller, now)}`;
});

/** How many times claim_next looks again (after 10, 20, 30 ms) when it skipped only rows locked by someone else. */
const CLAIM_LOCK_RETRIES = 3;

async function anyClaimable(sql: Sql, caller: Caller, queues: readonly string[], now: Date): Promise<boolean> {
  const [row] = await sql<{ any: boolean }[]>`
    select exists (
      select 1 from todos where endpoint_id = ${caller.endpointId} and not synthetic and queue = any(${sql.array([...queues])}::text[])
        and ${claimable(sql, caller.owner, now)}
    ) as any`;
  return row?.any ?? false;
}
