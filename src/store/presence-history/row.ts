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
  /** The operator's handle when `by` names the endpoint's owner (only an owner writes presence); null otherwise. */
  by_handle: string | null;
  reason: PresenceChangeReason;
  until: Date | null;
}

/** The columns of a PresenceChangeRow, from presence_history `ph` and the endpoint's owner `h`. */
export const changeColumns = (sql: Sql) => sql`
  ph.at, ph.from_presence as "from", ph.to_presence as "to", ph.source, ph.changed_by as "by",
  case when ph.changed_by = 'operator:' || h.id::text then h.handle end as by_handle, ph.reason, ph.until`;

/**
 * presence_history `ph` of one endpoint, joined to the endpoint's owner `h` so the statement itself
 * refuses another human's endpoint (answering nothing) and names no other human.
 */
export const ownedHistory = (sql: Sql, humanId: string, endpointId: string) => sql`
  presence_history ph
  join endpoints e on e.id = ph.endpoint_id
  join agents a on a.id = e.agent_id and a.owner_human_id = ${humanId}
  join humans h on h.id = a.owner_human_id
  where ph.endpoint_id = ${endpointId}`;
