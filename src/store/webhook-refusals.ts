import type { Sql } from '../db/connect.ts';

/** Refused deliveries of one webhook in one minute for one reason (the error code answered). */
export interface WebhookRefusalCount {
  webhookId: string;
  bucket: Date;
  reason: string;
  n: number;
}

/**
 * Adds counts of refused deliveries, in one statement. A webhook deleted meanwhile is skipped (its
 * refusals went with it), so one deletion never fails the rest of the batch.
 */
export async function addWebhookRefusals(sql: Sql, counts: WebhookRefusalCount[]): Promise<number> {
  if (counts.length === 0) return 0;
  const rows = counts.map((c) => ({ webhook_id: c.webhookId, bucket: c.bucket.toISOString(), reason: c.reason, n: c.n }));
  const written = await sql`
    insert into webhook_refusals as r (webhook_id, bucket, reason, n)
    select x.webhook_id, x.bucket, x.reason, x.n
    from jsonb_to_recordset(${sql.json(rows)}) as x(webhook_id uuid, bucket timestamptz, reason text, n integer)
    join webhooks w on w.id = x.webhook_id
    on conflict (webhook_id, bucket, reason) do update set n = r.n + excluded.n`;
  return written.count;
}

/**
 * Deletes up to `limit` minutes of refusal counts, of any webhook, before `cutoff` (the retention
 * loop), oldest first: picked through webhook_refusals_bucket_idx and deleted by their row ids (a
 * join on the three key columns was planned generically as a scan of the whole table).
 */
export async function deleteOldWebhookRefusalsUnscoped(sql: Sql, cutoff: Date, limit: number): Promise<number> {
  const rows = await sql`
    with doomed as materialized (
      select ctid from webhook_refusals where bucket < ${cutoff} order by bucket limit ${limit}
    )
    delete from webhook_refusals where ctid = any(array(select ctid from doomed))
    returning 1`;
  return rows.length;
}
