import type { Sql, TxSql } from '../../db/connect.ts';
import { hashSecret } from '../../lib/secrets.ts';
import { notify } from '../channels.ts';

/** One approval of one client for one resource: the family every code and token it issued belongs to. */
export interface OAuthGrant {
  id: string;
  client_id: string;
  client_name: string;
  human_id: string;
  endpoint_id: string | null;
  resource: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const grantColumns = (sql: Sql | TxSql) =>
  sql`g.id, g.client_id, c.client_name, g.human_id, g.endpoint_id, g.resource, g.created_at, g.last_used_at, g.revoked_at`;

export interface NewGrant {
  clientId: string;
  humanId: string;
  endpointId: string | null;
  resource: string;
  code: { plaintext: string; redirectUri: string; challenge: string; expiresAt: Date };
}

/** A new grant and its one authorization code (stored hashed), in one transaction. */
export async function createGrantWithCode(sql: Sql, g: NewGrant, now: Date): Promise<string> {
  return sql.begin(async (tx) => {
    const [grant] = await tx<{ id: string }[]>`
      insert into oauth_grants (client_id, human_id, endpoint_id, resource, created_at)
      values (${g.clientId}, ${g.humanId}, ${g.endpointId}, ${g.resource}, ${now}) returning id`;
    await tx`
      insert into oauth_codes (code_hash, grant_id, redirect_uri, code_challenge, expires_at)
      values (${hashSecret(g.code.plaintext)}, ${grant!.id}, ${g.code.redirectUri}, ${g.code.challenge}, ${g.code.expiresAt})`;
    return grant!.id;
  });
}

/** The live grants of an endpoint, newest first, for its owner. */
export async function endpointGrants(sql: Sql, endpointId: string): Promise<OAuthGrant[]> {
  return sql<OAuthGrant[]>`
    select ${grantColumns(sql)} from oauth_grants g join oauth_clients c on c.client_id = g.client_id
    where g.endpoint_id = ${endpointId} and g.revoked_at is null order by g.created_at desc, g.id`;
}

/** The live grants of each of a human's endpoints (the board's cards), newest first. */
export async function endpointGrantsOfEach(sql: Sql, humanId: string, endpointIds: readonly string[]): Promise<Map<string, OAuthGrant[]>> {
  const out = new Map<string, OAuthGrant[]>();
  if (endpointIds.length === 0) return out;
  const rows = await sql<OAuthGrant[]>`
    select ${grantColumns(sql)} from oauth_grants g join oauth_clients c on c.client_id = g.client_id
    where g.endpoint_id = any(${sql.array([...endpointIds])}::uuid[]) and g.human_id = ${humanId} and g.revoked_at is null
    order by g.created_at desc, g.id`;
  for (const g of rows) out.set(g.endpoint_id!, [...(out.get(g.endpoint_id!) ?? []), g]);
  return out;
}

/** The live API grants of a human (the CLI's browser logins), newest first. */
export async function apiGrantsOf(sql: Sql, humanId: string): Promise<OAuthGrant[]> {
  return sql<OAuthGrant[]>`
    select ${grantColumns(sql)} from oauth_grants g join oauth_clients c on c.client_id = g.client_id
    where g.human_id = ${humanId} and g.endpoint_id is null and g.revoked_at is null order by g.created_at desc, g.id`;
}

/**
 * Revokes a grant: its tokens stop resolving at once and its unspent codes die. Returns the
 * endpoint it opened (null for an API grant), or undefined when there was no such live grant.
 */
export async function revokeGrant(sql: Sql | TxSql, grantId: string, why: string, now: Date): Promise<{ endpoint_id: string | null } | undefined> {
  const [row] = await sql<{ endpoint_id: string | null }[]>`
    update oauth_grants set revoked_at = ${now}, revoked_why = ${why}
    where id = ${grantId} and revoked_at is null returning endpoint_id`;
  if (row) {
    await sql`update oauth_codes set used_at = coalesce(used_at, ${now}) where grant_id = ${grantId}`;
    // Every instance ends the sessions this grant's tokens opened (at commit, inside a transaction).
    await notify(sql, 'oauth_grant_revoked', { grantId });
  }
  return row;
}

/** Of the given grant ids, those no longer live (catching up on missed revocations). Crosses tenants: the ids are sessions' own. */
export async function revokedGrantIdsUnscoped(sql: Sql, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const live = await sql<{ id: string }[]>`select id from oauth_grants where id = any(${sql.array([...ids])}::uuid[]) and revoked_at is null`;
  const liveIds = new Set(live.map((r) => r.id));
  return ids.filter((id) => !liveIds.has(id));
}

/** Revokes every grant of an endpoint (the endpoint's own revocation, inside its transaction). */
export async function revokeEndpointGrants(tx: TxSql, endpointId: string, now: Date): Promise<number> {
  const revoked = await tx`
    update oauth_grants set revoked_at = ${now}, revoked_why = 'endpoint revoked'
    where endpoint_id = ${endpointId} and revoked_at is null returning id`;
  if (revoked.length > 0) {
    await tx`update oauth_codes set used_at = coalesce(used_at, ${now}) where grant_id = any(${tx.array(revoked.map((r) => r.id as string))}::uuid[])`;
  }
  return revoked.length;
}
