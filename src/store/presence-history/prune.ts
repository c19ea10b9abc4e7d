import type { Sql } from '../../db/connect.ts';

/** How long presence history is kept (issue 39), whatever SWITCHBOARD_RETENTION says. */
export const PRESENCE_HISTORY_KEEP_MS = 30 * 24 * 3_600_000;

/**
 * Deletes up to `limit` presence changes, of any endpoint, claimed before `cutoff` (the retention
 * loop), each by its primary key (joined to the table, a generic plan walked the key: store/retention.ts).
 */
export async function deleteOldPresenceHistoryUnscoped(sql: Sql, cutoff: Date, limit: number): Promise<number> {
  const rows = await sql`
    with doomed as materialized (
      select id from presence_history where at < ${cutoff} order by at limit ${limit}
    )
    delete from presence_history where id = any(array(select id from doomed))
    returning 1`;
  return rows.length;
}
