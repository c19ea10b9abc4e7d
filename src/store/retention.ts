import type { Sql } from '../db/connect.ts';
import { finished } from './todos/predicates.ts';

// Retention (SWITCHBOARD_RETENTION): what is deleted once it is older than the cutoff. Every
// statement picks at most `limit` ids first, then deletes them; live todos are never picked. The
// picked ids are deleted as `= any(array(...))`, each by its primary key: joined to the table
// (`using`), the product's generic plans read the whole primary key of events (a million entries)
// to delete a batch of 1,000 (issue 40, bench/loops.ts).
// Ring records and self-test reports are kept 7 days whatever the retention (SPEC-0025 REQ-1,
// REQ-8): rings.ts and selftests.ts delete them, never this file.


/** Finished todos last changed before `cutoff`, and the events they were made from. */
export async function deleteFinishedTodosUnscoped(sql: Sql, cutoff: Date, limit: number): Promise<{ todos: number; events: number }> {
  const [row] = await sql<{ todos: number; events: number }[]>`
    with doomed as materialized (
      select id from todos where ${finished(sql)} and updated_at < ${cutoff}
      order by updated_at limit ${limit} for update skip locked
    ), gone as (
      delete from todos t where t.id = any(array(select id from doomed)) returning t.event_id
    ), evs as (
      delete from events e where e.id = any(array(select event_id from gone where event_id is not null)) returning 1
    )
    select (select count(*) from gone)::int as todos, (select count(*) from evs)::int as events`;
  return row!;
}

/**
 * What routing recorded without making a todo (migration 0030's events_todoless_idx): a ping, a
 * delivery a rule dropped or failed on, a repeat of a `once` subject. Such an event is deleted
 * once received before `cutoff`, without reading the events todos keep. Written into the statement
 * as literals, as the index's predicate is: as parameters a generic plan cannot match it.
 */
const TODOLESS = ['dropped', 'faulted', 'repeat', 'recorded'] as const;

/** Events received before `cutoff` that routing recorded without a todo (TODOLESS), oldest first. */
export async function deleteTodolessEventsUnscoped(sql: Sql, cutoff: Date, limit: number): Promise<number> {
  const rows = await sql`
    with doomed as materialized (
      select e.id from events e
      where e.disposition in (${sql.unsafe(TODOLESS.map((d) => `'${d}'`).join(', '))}) and e.received_at < ${cutoff}
        and not exists (select 1 from todos t where t.event_id = e.id)
      order by e.received_at limit ${limit}
    )
    delete from events e
    where e.id = any(array(select id from doomed)) and not exists (select 1 from todos t where t.event_id = e.id)
    returning 1`;
  return rows.length;
}

/** Where the walk of deleteOrphanEventsUnscoped stopped: the last event it read. */
export interface EventWalkPosition {
  at: Date;
  id: string;
}

/**
 * Any event received before `cutoff` that no todo points at (a todo deleted some other way), read
 * in arrival order from just after `after` (null: the oldest), at most `scan` events a call. Old
 * events that live todos keep are read too, so the walk goes on from where the last call stopped
 * instead of reading them again each time: a call costs `scan` events at most, whatever the
 * backlog. `reached` is where this call stopped (null when it came to the cutoff: start over).
 */
export async function deleteOrphanEventsUnscoped(
  sql: Sql,
  cutoff: Date,
  scan: number,
  after: EventWalkPosition | null,
): Promise<{ deleted: number; reached: EventWalkPosition | null }> {
  const [row] = await sql<{ deleted: number; read: number; at: Date | null; id: string | null }[]>`
    with walked as materialized (
      select e.id, e.received_at from events e
      where e.received_at < ${cutoff}
        ${after ? sql`and (e.received_at, e.id) > (${after.at}::timestamptz, ${after.id}::bigint)` : sql``}
      order by e.received_at, e.id limit ${scan}
    ), gone as (
      delete from events e
      where e.id = any(array(select id from walked)) and not exists (select 1 from todos t where t.event_id = e.id)
      returning 1
    ), last as (
      select received_at, id from walked order by received_at desc, id desc limit 1
    )
    select (select count(*) from gone)::int as deleted, (select count(*) from walked)::int as read,
           (select received_at from last) as at, (select id::text from last) as id`;
  const reached = row!.read < scan || row!.at === null || row!.id === null ? null : { at: row!.at, id: row!.id };
  return { deleted: row!.deleted, reached };
}

/** Replay keys of bodies received before `cutoff`: past the window, such a body is new again anyway. */
export async function deleteOldReplayKeysUnscoped(sql: Sql, cutoff: Date, limit: number): Promise<number> {
  const rows = await sql`
    with doomed as materialized (
      select webhook_id, body_sha256 from replay_keys where received_at < ${cutoff} order by received_at limit ${limit}
    )
    delete from replay_keys k using doomed
    where k.webhook_id = doomed.webhook_id and k.body_sha256 = doomed.body_sha256 and k.received_at < ${cutoff}
    returning 1`;
  return rows.length;
}
