import type { Sql } from '../db/connect.ts';
import { finished } from './todos/predicates.ts';

// Retention (SWITCHBOARD_RETENTION): what is deleted once it is older than the cutoff. Every
// statement picks at most `limit` ids first, then deletes them; live todos are never picked.
// Ring records and self-test reports are kept 7 days whatever the retention (SPEC-0025 REQ-1,
// REQ-8): rings.ts and selftests.ts delete them, never this file.


/** Finished todos last changed before `cutoff`, and the events they were made from. */
export async function deleteFinishedTodosUnscoped(sql: Sql, cutoff: Date, limit: number): Promise<{ todos: number; events: number }> {
  const [row] = await sql<{ todos: number; events: number }[]>`
    with doomed as materialized (
      select id from todos where ${finished(sql)} and updated_at < ${cutoff}
      order by updated_at limit ${limit} for update skip locked
    ), gone as (
      delete from todos t using doomed where t.id = doomed.id returning t.event_id
    ), evs as (
      delete from events e using gone where e.id = gone.event_id returning 1
    )
    select (select count(*) from gone)::int as todos, (select count(*) from evs)::int as events`;
  return row!;
}

/** Events received before `cutoff` that no todo points at (a todo deleted some other way). */
export async function deleteOrphanEventsUnscoped(sql: Sql, cutoff: Date, limit: number): Promise<number> {
  const rows = await sql`
    with doomed as materialized (
      select e.id from events e
      where e.received_at < ${cutoff} and not exists (select 1 from todos t where t.event_id = e.id)
      order by e.received_at limit ${limit}
    )
    delete from events e using doomed
    where e.id = doomed.id and not exists (select 1 from todos t where t.event_id = e.id)
    returning 1`;
  return rows.length;
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
