import type { Sql } from '../../db/connect.ts';
import type { Presence, PresenceChangeReason, PresenceSource } from '../../domain/presence/index.ts';

/**
 * One change of an endpoint's effective presence (presence_history, written by the claim in
 * store/presence.ts claimPresenceTransitions): when it was claimed, from and to, what decides
 * from then on, who or what changed it and why, and until when it holds by itself.
 */
export interface PresenceChangeRow {
  at: Date;
  from: Presence;
  to: Presence;
  source: PresenceSource;
  /** `agent`, `operator:<human id>` or `shift`, as stored. */
  by: string;
  /** The operator's handle when `by` names a human who still exists; null otherwise. */
  by_handle: string | null;
  reason: PresenceChangeReason;
  until: Date | null;
}

/** The columns of a PresenceChangeRow, from presence_history `ph` with the operator's handle from `h`. */
export const changeColumns = (sql: Sql) => sql`
  ph.at, ph.from_presence as "from", ph.to_presence as "to", ph.source, ph.changed_by as "by", h.handle as by_handle, ph.reason, ph.until`;

/**
 * presence_history `ph` of one endpoint, joined to the endpoint's owner so the statement itself
 * refuses another human's endpoint (answering nothing), and to the human an operator's `by` names.
 */
export const ownedHistory = (sql: Sql, humanId: string, endpointId: string) => sql`
  presence_history ph
  join endpoints e on e.id = ph.endpoint_id
  join agents a on a.id = e.agent_id and a.owner_human_id = ${humanId}
  left join humans h on ph.changed_by like 'operator:%' and h.id::text = substr(ph.changed_by, 10)
  where ph.endpoint_id = ${endpointId}`;
