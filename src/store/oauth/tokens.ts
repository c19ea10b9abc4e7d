import type { Sql, TxSql } from '../../db/connect.ts';
import { OAUTH_ACCESS_TOKEN_PREFIX, OAUTH_CODE_PREFIX, OAUTH_REFRESH_TOKEN_PREFIX, hashSecret, mintSecret } from '../../lib/secrets.ts';
import { revokeGrant } from './grants.ts';

export const ACCESS_TOKEN_PREFIX = OAUTH_ACCESS_TOKEN_PREFIX;
export const REFRESH_TOKEN_PREFIX = OAUTH_REFRESH_TOKEN_PREFIX;
export const AUTHORIZATION_CODE_PREFIX = OAUTH_CODE_PREFIX;

export interface IssuedTokens {
  access_token: string;
  refresh_token: string;
  expires_in: number;
}

export interface TokenLifetimes {
  accessSeconds: number;
  refreshSeconds: number;
}

/** What a live access token opens. */
export interface ResolvedAccess {
  grant_id: string;
  human_id: string;
  endpoint_id: string | null;
  resource: string;
  /** When the access token presented stops being accepted. */
  expires_at: Date;
}

async function issue(tx: TxSql, grantId: string, life: TokenLifetimes, now: Date): Promise<IssuedTokens> {
  const access = mintSecret(ACCESS_TOKEN_PREFIX);
  const refresh = mintSecret(REFRESH_TOKEN_PREFIX);
  await tx`
    insert into oauth_tokens (token_hash, grant_id, kind, expires_at) values
      (${access.hash}, ${grantId}, 'access', ${new Date(now.getTime() + life.accessSeconds * 1000)}),
      (${refresh.hash}, ${grantId}, 'refresh', ${new Date(now.getTime() + life.refreshSeconds * 1000)})`;
  return { access_token: access.plaintext, refresh_token: refresh.plaintext, expires_in: life.accessSeconds };
}

export type CodeExchange =
  | { ok: true; tokens: IssuedTokens; grant: { id: string; resource: string } }
  | { ok: false; why: 'unknown' | 'expired' | 'reused' | 'revoked' | 'client' | 'redirect_uri' | 'verifier' | 'resource' };

export interface CodePresented {
  code: string;
  clientId: string;
  redirectUri: string | undefined;
  resource: string | undefined;
  /** Whether the verifier proves the stored challenge. */
  proves: (challenge: string) => boolean;
}

/**
 * Spends an authorization code and issues the grant's first tokens. The code is spent before any
 * check, so a failed exchange burns it; a code presented a second time revokes its grant (RFC 6749
 * §4.1.2: whatever was issued from it stops working).
 */
export async function exchangeCode(sql: Sql, p: CodePresented, life: TokenLifetimes, now: Date): Promise<CodeExchange> {
  const outcome = await sql.begin(async (tx): Promise<CodeExchange> => {
    const [code] = await tx<{ grant_id: string; redirect_uri: string; code_challenge: string; expires_at: Date; used_at: Date | null; client_id: string; resource: string; revoked_at: Date | null }[]>`
      select k.grant_id, k.redirect_uri, k.code_challenge, k.expires_at, k.used_at, g.client_id, g.resource, g.revoked_at
      from oauth_codes k join oauth_grants g on g.id = k.grant_id
      where k.code_hash = ${hashSecret(p.code)} for update of k, g`;
    if (!code) return { ok: false, why: 'unknown' };
    if (code.used_at) {
      await revokeGrant(tx, code.grant_id, 'authorization code reused', now);
      return { ok: false, why: code.revoked_at ? 'revoked' : 'reused' };
    }
    await tx`update oauth_codes set used_at = ${now} where code_hash = ${hashSecret(p.code)}`;
    if (code.revoked_at) return { ok: false, why: 'revoked' };
    if (code.expires_at <= now) return { ok: false, why: 'expired' };
    if (code.client_id !== p.clientId) return { ok: false, why: 'client' };
    if (p.redirectUri !== undefined && p.redirectUri !== code.redirect_uri) return { ok: false, why: 'redirect_uri' };
    if (p.resource !== undefined && p.resource.replace(/\/+$/, '') !== code.resource) return { ok: false, why: 'resource' };
    if (!p.proves(code.code_challenge)) return { ok: false, why: 'verifier' };
    return { ok: true, tokens: await issue(tx, code.grant_id, life, now), grant: { id: code.grant_id, resource: code.resource } };
  });
  return outcome;
}

export type RefreshOutcome = { ok: true; tokens: IssuedTokens } | { ok: false; why: 'unknown' | 'expired' | 'reused' | 'revoked' | 'client' | 'resource' };

/**
 * Rotates a refresh token: the presented one is spent and a new pair issued, atomically. A spent
 * refresh token presented again means it was copied: the whole grant is revoked (OAuth 2.1 §4.3.1).
 * Fails once the grant is revoked (the endpoint's revocation revokes its grants).
 */
export async function rotateRefreshToken(sql: Sql, presented: string, clientId: string, resource: string | undefined, life: TokenLifetimes, now: Date): Promise<RefreshOutcome> {
  return sql.begin(async (tx): Promise<RefreshOutcome> => {
    const [row] = await tx<{ grant_id: string; expires_at: Date; used_at: Date | null; client_id: string; resource: string; revoked_at: Date | null }[]>`
      select t.grant_id, t.expires_at, t.used_at, g.client_id, g.resource, g.revoked_at
      from oauth_tokens t join oauth_grants g on g.id = t.grant_id
      where t.token_hash = ${hashSecret(presented)} and t.kind = 'refresh' for update of t, g`;
    if (!row) return { ok: false, why: 'unknown' };
    if (row.revoked_at) return { ok: false, why: 'revoked' };
    if (row.client_id !== clientId) return { ok: false, why: 'client' };
    if (row.used_at) {
      await revokeGrant(tx, row.grant_id, 'refresh token reused', now);
      return { ok: false, why: 'reused' };
    }
    if (row.expires_at <= now) return { ok: false, why: 'expired' };
    if (resource !== undefined && resource.replace(/\/+$/, '') !== row.resource) return { ok: false, why: 'resource' };
    await tx`update oauth_tokens set used_at = ${now} where token_hash = ${hashSecret(presented)}`;
    // The access tokens of the older pair end with the rotation: only the newest pair is live.
    await tx`update oauth_tokens set expires_at = least(expires_at, ${now}) where grant_id = ${row.grant_id} and kind = 'access'`;
    return { ok: true, tokens: await issue(tx, row.grant_id, life, now) };
  });
}

/**
 * The grant a live access token belongs to, if the grant is live (and, for an endpoint grant, the
 * endpoint is active). `last_used_at` moves at most once a minute.
 */
export async function resolveAccessTokenUnscoped(sql: Sql, presented: string, now: Date): Promise<ResolvedAccess | null> {
  if (!presented.startsWith(ACCESS_TOKEN_PREFIX)) return null;
  const [row] = await sql<ResolvedAccess[]>`
    with hit as (
      select g.id, g.human_id, g.endpoint_id, g.resource, t.expires_at from oauth_tokens t
      join oauth_grants g on g.id = t.grant_id and g.revoked_at is null
      left join endpoints e on e.id = g.endpoint_id
      where t.token_hash = ${hashSecret(presented)} and t.kind = 'access' and t.expires_at > ${now}
        and (g.endpoint_id is null or e.state = 'active')
    ), stamp as (
      update oauth_grants set last_used_at = ${now}
      where id = (select id from hit) and (last_used_at is null or last_used_at < ${now}::timestamptz - interval '60 seconds')
    )
    select id as grant_id, human_id, endpoint_id, resource, expires_at from hit`;
  return row ?? null;
}

/**
 * Removes OAuth rows past use before `before`, at most `batch` of each kind: expired tokens and
 * codes, then revoked grants with nothing left, then clients registered before it that hold no
 * grant (registration is open to anyone; the retention loop).
 */
export async function deleteExpiredOAuthRowsUnscoped(sql: Sql, before: Date, batch: number): Promise<number> {
  // Each picks its ids first (a materialized CTE) through an index on the time it goes by, and
  // deletes them by primary key (`= any(array(...))`): `where key in (select ... limit)` was planned
  // as a hash of the batch probed by a scan of the whole table (migration 0030, issue 40).
  const tokens = await sql`
    with doomed as materialized (select token_hash from oauth_tokens where expires_at < ${before} order by expires_at limit ${batch})
    delete from oauth_tokens where token_hash = any(array(select token_hash from doomed))`;
  const codes = await sql`
    with doomed as materialized (select code_hash from oauth_codes where expires_at < ${before} order by expires_at limit ${batch})
    delete from oauth_codes where code_hash = any(array(select code_hash from doomed))`;
  const grants = await sql`
    with doomed as materialized (
      select g.id from oauth_grants g where g.revoked_at < ${before}
        -- A scalar subquery, probed per grant through oauth_tokens_grant_idx: as NOT EXISTS a generic
        -- plan hashed every token to answer it.
        and (select t.grant_id from oauth_tokens t where t.grant_id = g.id limit 1) is null
      order by g.revoked_at limit ${batch})
    delete from oauth_grants where id = any(array(select id from doomed))`;
  // Registration is open: a client that never got a grant within the window is forgotten. Its
  // grants are probed per client (oauth_grants_client_idx), as a scalar subquery: as NOT EXISTS
  // the planner hashed every grant.
  const clients = await sql`
    with doomed as materialized (
      select c.client_id from oauth_clients c where c.created_at < ${before}
        and (select g.client_id from oauth_grants g where g.client_id = c.client_id limit 1) is null
      order by c.created_at limit ${batch})
    delete from oauth_clients c where c.client_id = any(array(select client_id from doomed))
      and (select g.client_id from oauth_grants g where g.client_id = c.client_id limit 1) is null`;
  return Math.max(tokens.count, codes.count, grants.count, clients.count);
}
