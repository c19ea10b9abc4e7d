import { randomBytes, randomUUID } from 'node:crypto';
import type { Fragment, Sql } from '../db/connect.ts';
import { conflict, notFound, SwitchboardError } from '../domain/errors.ts';
import { hashSecret } from '../lib/secrets.ts';
import { SOURCE_TYPES, type SourceType } from '../domain/webhook-source.ts';
import { isUuid } from '../domain/ids.ts';
import type { RouteAction, RoutingRule } from '../domain/routing/rules.ts';

export { SOURCE_TYPES, type SourceType };

/** Trust is derived from the source, never chosen by a caller. */
export const trustModeOf = (source: SourceType): 'signed' | 'token' => (source === 'generic' ? 'token' : 'signed');
/** A human may give one endpoint this many webhooks; its agent, only its vend-time ceiling. */
export const WEBHOOKS_PER_ENDPOINT_MAX = 20;

export interface WebhookRow {
  id: string;
  endpoint_id: string;
  source_type: SourceType;
  trust_mode: 'signed' | 'token';
  target_queue: string;
  ingest_token_hint: string;
  signing_secret: string | null;
  created_by: string;
  created_at: Date;
  rotated_at: Date | null;
  last_delivery_at: Date | null;
  /** Routing (migration 0023): ordered rules, the params they read, the action when none matches (null: target_queue). */
  routing_rules: RoutingRule[];
  routing_params: Record<string, unknown>;
  routing_default: RouteAction | null;
}

/** What delivery needs: the webhook and the state of its owning endpoint. */
export interface IngestTarget extends WebhookRow {
  endpoint_state: 'active' | 'revoked';
  endpoint_slug: string;
  scope_queues: string[];
  /** The human who owns the endpoint: a fan-out reaches only their endpoints. */
  owner_human_id: string;
}

export interface MintedWebhook {
  webhook: WebhookRow;
  ingestToken: string;
  /** `whsec_...`, for signed webhooks only; shown once. */
  signingSecret: string | null;
}

const mintIngestToken = () => randomBytes(16).toString('hex');
const mintSigningSecret = () => `whsec_${randomBytes(32).toString('base64url')}`;

export async function createWebhook(
  sql: Sql,
  input: { endpointId: string; source: SourceType; queue: string; createdBy: string; ceiling: number; seal: (s: string, webhookId: string) => string },
  now: Date,
): Promise<MintedWebhook> {
  const ingestToken = mintIngestToken();
  const secret = trustModeOf(input.source) === 'signed' ? mintSigningSecret() : null;
  // The id is chosen here: the sealed secret is bound to it.
  const id = randomUUID();
  const webhook = await sql.begin(async (tx) => {
    // Serialize creations per endpoint so the ceiling holds under concurrency.
    await tx`select id from endpoints where id = ${input.endpointId} for update`;
    const [{ n }] = (await tx`select count(*)::int as n from webhooks where endpoint_id = ${input.endpointId}`) as unknown as [{ n: number }];
    if (n >= input.ceiling) {
      throw new SwitchboardError('conflict', `this endpoint already has ${n} webhook(s), its limit`, { ceiling: input.ceiling, used: n });
    }
    const [row] = await tx<WebhookRow[]>`
      insert into webhooks (id, endpoint_id, source_type, trust_mode, target_queue, ingest_token_hash, ingest_token_hint,
                            signing_secret, created_by, created_at)
      values (${id}, ${input.endpointId}, ${input.source}, ${trustModeOf(input.source)}, ${input.queue}, ${hashSecret(ingestToken)},
              ${ingestToken.slice(0, 6)}, ${secret ? input.seal(secret, id) : null}, ${input.createdBy}, ${now})
      returning *`;
    return row!;
  });
  return { webhook, ingestToken, signingSecret: secret };
}

export async function listWebhooks(sql: Sql, endpointId: string): Promise<WebhookRow[]> {
  return sql<WebhookRow[]>`select * from webhooks where endpoint_id = ${endpointId} order by created_at, id`;
}

/** A webhook of one of the human's own endpoints; anyone else's answers like a missing one. */
export async function getOwnWebhook(sql: Sql, humanId: string, webhookId: string): Promise<WebhookRow> {
  const [row] = isUuid(webhookId)
    ? await sql<WebhookRow[]>`
        select w.* from webhooks w join endpoints e on e.id = w.endpoint_id join agents a on a.id = e.agent_id
        where w.id = ${webhookId} and a.owner_human_id = ${humanId}`
    : [];
  if (!row) throw notFound('no webhook by that id belongs to you');
  return row;
}

export async function getEndpointWebhook(sql: Sql, endpointId: string, webhookId: string): Promise<WebhookRow> {
  const [row] = isUuid(webhookId) ? await sql<WebhookRow[]>`select * from webhooks where id = ${webhookId} and endpoint_id = ${endpointId}` : [];
  if (!row) throw notFound('no webhook by that id on this endpoint');
  return row;
}

/** A new ingest token and (signed) a new secret; the old URL and secret stop working at once. */
export async function rotateWebhook(sql: Sql, webhook: WebhookRow, seal: (s: string) => string, now: Date): Promise<MintedWebhook> {
  const ingestToken = mintIngestToken();
  const secret = webhook.trust_mode === 'signed' ? mintSigningSecret() : null;
  const [row] = await sql<WebhookRow[]>`
    update webhooks set ingest_token_hash = ${hashSecret(ingestToken)}, ingest_token_hint = ${ingestToken.slice(0, 6)},
      signing_secret = ${secret ? seal(secret) : null}, rotated_at = ${now}
    where id = ${webhook.id} returning *`;
  if (!row) throw conflict('the webhook was deleted meanwhile');
  return { webhook: row, ingestToken, signingSecret: secret };
}

export async function deleteWebhook(sql: Sql, webhookId: string): Promise<boolean> {
  const rows = await sql`delete from webhooks where id = ${webhookId} returning id`;
  return rows.length === 1;
}

/** The ingest route's lookup: by the SHA-256 of the token in the URL. Crosses tenants by design. */
export async function findIngestTargetUnscoped(sql: Sql, ingestToken: string): Promise<IngestTarget | null> {
  const [row] = await sql<IngestTarget[]>`
    select w.*, e.state as endpoint_state, e.slug as endpoint_slug, e.scope_queues, a.owner_human_id
    from webhooks w join endpoints e on e.id = w.endpoint_id join agents a on a.id = e.agent_id
    where w.ingest_token_hash = ${hashSecret(ingestToken)}`;
  return row ?? null;
}

/**
 * Stamps the webhooks of the deliveries a statement wrote (`webhookIds`, a subquery over its
 * written events, so a refused one — a replay, a revoked endpoint — changes nothing) with their
 * last delivery, at most once a minute (every delivery writing one hot row would serialize them):
 * a CTE of every delivery statement.
 */
export const touchDelivery = (sql: Sql, webhookIds: Fragment, now: Fragment) => sql`
  update webhooks set last_delivery_at = ${now}
  where id in (${webhookIds}) and (last_delivery_at is null or last_delivery_at < ${now} - interval '60 seconds')`;

export async function countSignedWebhooksUnscoped(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from webhooks where trust_mode = 'signed'`;
  return row?.n ?? 0;
}

/** Signing secrets in a form older than row-bound sealing (`plain:`, `v1:`), across tenants: the startup reseal's work. */
export async function legacyWebhookSecretsUnscoped(sql: Sql): Promise<{ id: string; signing_secret: string }[]> {
  return sql<{ id: string; signing_secret: string }[]>`
    select id, signing_secret from webhooks where signing_secret like 'plain:%' or signing_secret like 'v1:%'`;
}

/** Replaces one legacy secret with its resealed form, unless it changed meanwhile (a rotation). */
export async function resealWebhookSecretUnscoped(sql: Sql, id: string, from: string, to: string): Promise<boolean> {
  const rows = await sql`update webhooks set signing_secret = ${to} where id = ${id} and signing_secret = ${from} returning 1`;
  return rows.length === 1;
}

export interface EventSummary {
  id: string;
  source: string;
  event_type: string | null;
  external_id: string | null;
  trust_mode: string;
  verified: boolean;
  verify_detail: string | null;
  content_type: string | null;
  headers: Record<string, string>;
  payload_size: number;
  webhook_id: string | null;
  received_at: Date;
  todo_id: string | null;
  /** What routing made of it (null on events older than routing). */
  disposition: string | null;
  routing: unknown;
}

/** Delivery history of one endpoint, newest first. */
export async function listEndpointEvents(sql: Sql, endpointId: string, limit: number): Promise<EventSummary[]> {
  return sql<EventSummary[]>`
    select ev.id::text as id, ev.source, ev.event_type, ev.external_id, ev.trust_mode, ev.verified, ev.verify_detail,
      ev.content_type, ev.headers, ev.payload_size, ev.webhook_id, ev.received_at, ev.disposition, ev.routing,
      (select t.id from todos t where t.event_id = ev.id order by t.created_at limit 1) as todo_id
    from events ev
    where ev.endpoint_id = ${endpointId}
    order by ev.received_at desc, ev.id desc
    limit ${limit}`;
}
