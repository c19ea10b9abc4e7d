import { randomBytes } from 'node:crypto';
import type { Sql } from '../db/connect.ts';
import { hashSecret } from '../lib/secrets.ts';
import { getHumanByHandle, type Human } from './humans.ts';

/** A sign-in link works once, for 15 minutes. */
export const LOGIN_LINK_TTL_MS = 15 * 60_000;
/** A board session lasts 12 hours from sign-in (absolute, never extended). */
export const WEB_SESSION_TTL_MS = 12 * 3_600_000;

/** 32 random bytes, base64url: the cookie value or the last path segment of a sign-in link. */
export const mintWebToken = (): string => randomBytes(32).toString('base64url');
const WEB_TOKEN = /^[A-Za-z0-9_-]{43}$/;
export const isWebTokenShape = (s: string): boolean => WEB_TOKEN.test(s);

/** Mints a sign-in link token for a human (by handle); only its SHA-256 is stored. */
export async function createLoginLink(sql: Sql, handle: string, now: Date): Promise<{ token: string; human: Human; expiresAt: Date }> {
  const human = await getHumanByHandle(sql, handle);
  const token = mintWebToken();
  const expiresAt = new Date(now.getTime() + LOGIN_LINK_TTL_MS);
  await sql`
    insert into login_links (token_hash, human_id, created_at, expires_at)
    values (${hashSecret(token)}, ${human.id}, ${now}, ${expiresAt})`;
  // Housekeeping: links past their end are worth nothing.
  await sql`delete from login_links where expires_at < ${now}::timestamptz - interval '1 day'`;
  return { token, human, expiresAt };
}

/** Whether a link could still be used now (the confirm page asks; it spends nothing). */
export async function loginLinkUsable(sql: Sql, token: string, now: Date): Promise<boolean> {
  if (!isWebTokenShape(token)) return false;
  const [row] = await sql`
    select 1 from login_links where token_hash = ${hashSecret(token)} and used_at is null and expires_at > ${now}`;
  return row !== undefined;
}

/**
 * Spends a sign-in link and opens a session for its human, in one statement: the conditional
 * update of the link decides, so two concurrent uses yield exactly one session. Returns the
 * session token, or null when the link is unknown, used or expired.
 */
export async function consumeLoginLink(sql: Sql, token: string, now: Date): Promise<{ sessionToken: string; humanId: string; expiresAt: Date } | null> {
  if (!isWebTokenShape(token)) return null;
  const sessionToken = mintWebToken();
  const expiresAt = new Date(now.getTime() + WEB_SESSION_TTL_MS);
  const [row] = await sql<{ human_id: string }[]>`
    with spent as (
      update login_links set used_at = ${now}
      where token_hash = ${hashSecret(token)} and used_at is null and expires_at > ${now}
      returning human_id
    )
    insert into web_sessions (token_hash, human_id, created_at, expires_at)
    select ${hashSecret(sessionToken)}, human_id, ${now}, ${expiresAt} from spent
    returning human_id`;
  if (!row) return null;
  await sql`delete from web_sessions where expires_at < ${now}`;
  return { sessionToken, humanId: row.human_id, expiresAt };
}

/** Opens a 12-hour session for a human whose identity was proved elsewhere (an OIDC sign-in). */
export async function openWebSession(sql: Sql, humanId: string, now: Date): Promise<{ sessionToken: string; expiresAt: Date }> {
  const sessionToken = mintWebToken();
  const expiresAt = new Date(now.getTime() + WEB_SESSION_TTL_MS);
  await sql`
    insert into web_sessions (token_hash, human_id, created_at, expires_at)
    values (${hashSecret(sessionToken)}, ${humanId}, ${now}, ${expiresAt})`;
  await sql`delete from web_sessions where expires_at < ${now}`;
  return { sessionToken, expiresAt };
}

/** The human behind a live session cookie, or null (unknown or past its 12 hours). */
export async function findWebSession(sql: Sql, sessionToken: string, now: Date): Promise<{ human: Human; expiresAt: Date } | null> {
  if (!isWebTokenShape(sessionToken)) return null;
  const [row] = await sql<(Human & { expires_at: Date })[]>`
    select h.id, h.handle, h.display_name, h.email, h.created_at, s.expires_at
    from web_sessions s join humans h on h.id = s.human_id
    where s.token_hash = ${hashSecret(sessionToken)} and s.expires_at > ${now}`;
  if (!row) return null;
  const { expires_at, ...human } = row;
  return { human, expiresAt: expires_at };
}

export async function deleteWebSession(sql: Sql, sessionToken: string): Promise<boolean> {
  const rows = await sql`delete from web_sessions where token_hash = ${hashSecret(sessionToken)} returning 1`;
  return rows.length > 0;
}
