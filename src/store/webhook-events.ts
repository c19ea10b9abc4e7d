import type { Sql } from '../db/connect.ts';
import { deliveryArgs, endpointGone, eventOnlyStatement, eventRow, replayKeyHolder, replayWindowMs } from './event-insert.ts';
import type { EventInput } from './todos/index.ts';

/**
 * Records a verified delivery that makes no todo (a GitHub ping, a Gitea test delivery): the event
 * row alone, in one statement, its endpoint share-locked and active as for a push. A signed body
 * this webhook already received within the replay window is not written again: the event holding
 * the body's replay key comes back with created=false. Pushes claim the same keys, so a recorded
 * body and a pushed one cannot both miss each other.
 */
export async function recordEventWithoutTodo(
  sql: Sql,
  event: EventInput & { endpointId: string },
  now: Date,
): Promise<{ eventId: string; created: boolean }> {
  const args = deliveryArgs(event.endpointId, replayWindowMs(event, now), [eventRow(1, event, event.endpointId, now)]);
  const [row] = await eventOnlyStatement(sql).run<{ active: boolean; new_event_id: string | null }>(sql, args);
  if (!row!.active) return endpointGone(sql, event.endpointId);
  if (row!.new_event_id !== null) return { eventId: row!.new_event_id, created: true };
  const holder = await replayKeyHolder(sql, event.webhookId!, event.replay!.bodySha256, event.endpointId);
  return { eventId: holder?.eventId ?? '', created: false };
}

