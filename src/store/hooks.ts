import type { Sql } from '../db/connect.ts';
import { SwitchboardError, notFound } from '../domain/errors.ts';
import { isUuid } from '../domain/ids.ts';

export interface HookRow {
  id: string;
  endpoint_id: string;
  url: string;
  secret: string;
  prev_secret: string | null;
  prev_secret_expires_at: Date | null;
  queues: string[];
  ignore_presence: boolean;
  enabled: boolean;
  disabled_reason: 'consecutive_failures' | 'operator' | null;
  disabled_at: Date | null;
  consecutive_failures: number;
  last_attempt_at: Date | null;
  last_status: number | null;
  last_error: string | null;
  created_by: string;
  created_at: Date;
  rotated_at: Date | null;
}

/** Every notify hook, across tenants (each has a secret: the startup warning when no key is set). */
export async function countHooksUnscoped(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from notify_hooks`;
  return row?.n ?? 0;
}

/** Hook secrets in a form older than row-bound sealing (`plain:`, `v1:`), across tenants: the startup reseal's work. */
export async function legacyHookSecretsUnscoped(sql: Sql): Promise<{ id: string; secret: string; prev_secret: string | null }[]> {
  return sql<{ id: string; secret: string; prev_secret: string | null }[]>`
    select id, secret, prev_secret from notify_hooks
    where secret like 'plain:%' or secret like 'v1:%' or prev_secret like 'plain:%' or prev_secret like 'v1:%'`;
}

/** Replaces one hook's legacy secrets with their resealed forms, unless they changed meanwhile (a rotation). */
export async function resealHookSecretsUnscoped(
  sql: Sql,
  id: string,
  from: { secret: string; prev_secret: string | null },
  to: { secret: string; prev_secret: string | null },
): Promise<boolean> {
  const rows = await sql`
    update notify_hooks set secret = ${to.secret}, prev_secret = ${to.prev_secret}
    where id = ${id} and secret = ${from.secret} and prev_secret is not distinct from ${from.prev_secret}
    returning 1`;
  return rows.length === 1;
}

/** Failed deliveries in a row after which a hook turns itself off. */
export const HOOK_DISABLE_AFTER = 10;

export async function insertHook(
  sql: Sql,
  h: { id: string; endpointId: string; url: string; sealedSecret: string; queues: string[]; ignorePresence: boolean; createdBy: string; max: number },
  now: Date,
): Promise<HookRow> {
  return sql.begin(async (tx) => {
    await tx`select id from endpoints where id = ${h.endpointId} for update`;
    const [{ n }] = (await tx`select count(*)::int as n from notify_hooks where endpoint_id = ${h.endpointId}`) as unknown as [{ n: number }];
    if (n >= h.max) throw new SwitchboardError('resource_exhausted', `this endpoint already has ${n} notify hooks, the most it may have`, { max: h.max, used: n });
    const [row] = await tx<HookRow[]>`
      insert into notify_hooks (id, endpoint_id, url, secret, queues, ignore_presence, created_by, created_at)
      values (${h.id}, ${h.endpointId}, ${h.url}, ${h.sealedSecret}, ${tx.array(h.queues)}, ${h.ignorePresence}, ${h.createdBy}, ${now})
      returning *`;
    return row!;
  });
}

export async function listHooks(sql: Sql, endpointId: string): Promise<HookRow[]> {
  return sql<HookRow[]>`select * from notify_hooks where endpoint_id = ${endpointId} order by created_at, id`;
}

/**
 * The enabled hooks of one active endpoint, with what firing needs to know about it, in one
 * query (most endpoints have no hook, and this runs after every new todo).
 */
export async function hookTargets(sql: Sql, endpointId: string): Promise<{ endpoint: HookEndpoint; hooks: HookRow[] } | null> {
  const rows = await sql<(HookRow & { endpoint: HookEndpoint })[]>`
    select h.*, json_build_object('id', e.id, 'slug', e.slug, 'scope_queues', e.scope_queues, 'shift', e.shift,
      'presence_override', e.presence_override, 'override_until', e.override_until, 'override_set_at', e.override_set_at,
      'override_by', e.override_by) as endpoint
    from notify_hooks h join endpoints e on e.id = h.endpoint_id
    where h.endpoint_id = ${endpointId} and h.enabled and e.state = 'active'
    order by h.created_at, h.id`;
  if (rows.length === 0) return null;
  const raw = rows[0]!.endpoint as unknown as Record<string, unknown>;
  const when = (v: unknown) => (typeof v === 'string' ? new Date(v) : null);
  const endpoint: HookEndpoint = {
    ...(raw as unknown as HookEndpoint),
    override_until: when(raw.override_until),
    override_set_at: when(raw.override_set_at),
  };
  return { endpoint, hooks: rows.map(({ endpoint: _drop, ...h }) => h as HookRow) };
}

/**
 * The hook as a delivery about to be attempted must see it: enabled, its endpoint active, its
 * current URL and secrets. Null when it was deleted, disabled or its endpoint revoked since.
 */
export async function deliverableHook(sql: Sql, endpointId: string, hookId: string): Promise<HookRow | null> {
  const [row] = await sql<HookRow[]>`
    select h.* from notify_hooks h join endpoints e on e.id = h.endpoint_id
    where h.id = ${hookId} and h.endpoint_id = ${endpointId} and h.enabled and e.state = 'active'`;
  return row ?? null;
}

export interface HookEndpoint {
  id: string;
  slug: string;
  scope_queues: string[];
  shift: string | null;
  presence_override: 'in' | 'out' | null;
  override_until: Date | null;
  override_set_at: Date | null;
  override_by: string | null;
}


export async function getEndpointHook(sql: Sql, endpointId: string, hookId: string): Promise<HookRow> {
  const [row] = isUuid(hookId) ? await sql<HookRow[]>`select * from notify_hooks where id = ${hookId} and endpoint_id = ${endpointId}` : [];
  if (!row) throw notFound('no notify hook by that id on this endpoint');
  return row;
}

export async function getOwnHook(sql: Sql, humanId: string, hookId: string): Promise<HookRow> {
  const [row] = isUuid(hookId)
    ? await sql<HookRow[]>`
        select h.* from notify_hooks h join endpoints e on e.id = h.endpoint_id join agents a on a.id = e.agent_id
        where h.id = ${hookId} and a.owner_human_id = ${humanId}`
    : [];
  if (!row) throw notFound('no notify hook by that id belongs to you');
  return row;
}

/** A new secret; the old one keeps signing beside it until `graceUntil`; re-enables the hook. */
export async function rotateHook(sql: Sql, hookId: string, sealedSecret: string, graceUntil: Date, now: Date): Promise<HookRow> {
  const [row] = await sql<HookRow[]>`
    update notify_hooks set prev_secret = secret, prev_secret_expires_at = ${graceUntil}, secret = ${sealedSecret},
      rotated_at = ${now}, enabled = true, disabled_reason = null, disabled_at = null, consecutive_failures = 0
    where id = ${hookId} returning *`;
  if (!row) throw notFound('no notify hook by that id');
  return row;
}

export async function deleteHook(sql: Sql, hookId: string): Promise<void> {
  await sql`delete from notify_hooks where id = ${hookId}`;
}

/** Records one delivery's outcome; the tenth failure in a row disables the hook. */
export async function recordHookOutcome(
  sql: Sql,
  hookId: string,
  o: { ok: boolean; status: number | null; error: string | null },
  now: Date,
): Promise<{ disabled: boolean }> {
  const [row] = await sql<{ enabled: boolean; was_enabled: boolean }[]>`
    update notify_hooks h set
      last_attempt_at = ${now}, last_status = ${o.status}, last_error = ${o.error},
      consecutive_failures = case when ${o.ok} then 0 else h.consecutive_failures + 1 end,
      enabled = h.enabled and (${o.ok} or h.consecutive_failures + 1 < ${HOOK_DISABLE_AFTER}),
      disabled_reason = case when h.enabled and not ${o.ok} and h.consecutive_failures + 1 >= ${HOOK_DISABLE_AFTER}
                             then 'consecutive_failures' else h.disabled_reason end,
      disabled_at = case when h.enabled and not ${o.ok} and h.consecutive_failures + 1 >= ${HOOK_DISABLE_AFTER}
                         then ${now}::timestamptz else h.disabled_at end
    from (select id, enabled as was_enabled from notify_hooks where id = ${hookId}) prior
    where h.id = prior.id
    returning h.enabled, prior.was_enabled`;
  return { disabled: row !== undefined && row.was_enabled && !row.enabled };
}
