import type { Sql } from '../db/connect.ts';
import { endpointRevoked } from './endpoints.ts';
import type { EventInput } from './todos/index.ts';

/**
 * Records a verified delivery that makes no todo (a GitHub ping, a Gitea test delivery): the event
 * row alone, its endpoint share-locked and active as for a push. A signed body this webhook already
 * received within the replay window is not written again: the earlier event's id comes back with
 * created=false. Deliveries of one body to one webhook serialize on the same advisory lock a push
 * takes, so a recorded body and a pushed one cannot both miss each other.
 */
export async function recordEventWithoutTodo(
  sql: Sql,
  event: EventInput & { endpointId: string },
  now: Date,
): Promise<{ eventId: string; created: boolean }> {
  return sql.begin(async (tx) => {
    const r = event.replay;
    if (r && event.webhookId) {
      await tx`select pg_advisory_xact_lock(hashtextextended(${`replay:${event.webhookId}:${r.bodySha256.toString('hex')}`}, 0))`;
      const [prior] = await tx<{ id: string }[]>`
        select id::text as id from events
        where webhook_id = ${event.webhookId} and body_sha256 = ${r.bodySha256} and received_at >= ${r.since}
        order by received_at, id limit 1`;
      if (prior) return { eventId: prior.id, created: false };
    }
    const [row] = await tx<{ id: string }[]>`
      with ep as (select id from endpoints where id = ${event.endpointId} and state = 'active' for share)
      insert into events (source, family, event_type, external_id, trust_mode, verified, verify_detail,
                          content_type, headers, payload, payload_size, webhook_id, endpoint_id, received_at, body_sha256)
      select ${event.source}, ${event.family}, ${event.eventType ?? null}, ${event.externalId ?? null},
             ${event.trustMode}, ${event.verified}, ${event.verifyDetail ?? null}, ${event.contentType ?? null},
             ${tx.json(event.headers ?? {})}, ${event.payload ?? null}, ${event.payload?.length ?? 0},
             ${event.webhookId ?? null}, ep.id, ${now}, ${r?.bodySha256 ?? null}
      from ep
      returning id::text as id`;
    if (!row) {
      const [gone] = await tx<{ slug: string }[]>`select slug from endpoints where id = ${event.endpointId}`;
      throw endpointRevoked({ slug: gone?.slug ?? event.endpointId, state: 'revoked' });
    }
    return { eventId: row.id, created: true };
  });
}
