import type { Sql } from '../../db/connect.ts';
import { changeColumns, ownedHistory, type PresenceChangeRow } from './row.ts';

/**
 * The last presence change of one of the human's endpoints claimed before `at`: what held at `at`
 * (a chart band's first stretch). Null when none is kept (none happened, or retention removed it).
 */
export async function presenceChangeBefore(sql: Sql, humanId: string, endpointId: string, at: Date): Promise<PresenceChangeRow | null> {
  const [row] = await sql<PresenceChangeRow[]>`
    select ${changeColumns(sql)}
    from ${ownedHistory(sql, humanId, endpointId)} and ph.at < ${at}
    order by ph.at desc, ph.id desc
    limit 1`;
  return row ?? null;
}
