import type { Sql } from '../../db/connect.ts';
import { changeColumns, ownedHistory, type PresenceChangeRow } from './row.ts';

/**
 * One of the human's endpoints' presence changes claimed in [since, until) (no `until`: up to
 * now and beyond), newest first, at most `limit`. Another human's endpoint answers none.
 */
export function listPresenceChanges(
  sql: Sql,
  humanId: string,
  endpointId: string,
  w: { since: Date; until?: Date; limit: number },
): Promise<PresenceChangeRow[]> {
  return sql<PresenceChangeRow[]>`
    select ${changeColumns(sql)}
    from ${ownedHistory(sql, humanId, endpointId)}
      and ph.at >= ${w.since} ${w.until ? sql`and ph.at < ${w.until}` : sql``}
    order by ph.at desc, ph.id desc
    limit ${w.limit}`;
}
