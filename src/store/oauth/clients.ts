import { randomBytes } from 'node:crypto';
import type { Sql } from '../../db/connect.ts';
import type { ClientRegistration } from '../../domain/oauth/client-metadata.ts';

export interface OAuthClient {
  client_id: string;
  client_name: string;
  redirect_uris: string[];
  created_at: Date;
}

/** Registers a public client (RFC 7591). The client id is 16 random bytes in hex: an identifier, not a secret. */
export async function registerClient(sql: Sql, reg: ClientRegistration, now: Date): Promise<OAuthClient> {
  const [row] = await sql<OAuthClient[]>`
    insert into oauth_clients (client_id, client_name, redirect_uris, created_at)
    values (${randomBytes(16).toString('hex')}, ${reg.client_name}, ${sql.array(reg.redirect_uris)}, ${now})
    returning client_id, client_name, redirect_uris, created_at`;
  return row!;
}

export async function findClient(sql: Sql, clientId: string): Promise<OAuthClient | null> {
  if (!/^[0-9a-f]{32}$/.test(clientId)) return null;
  const [row] = await sql<OAuthClient[]>`select client_id, client_name, redirect_uris, created_at from oauth_clients where client_id = ${clientId}`;
  return row ?? null;
}
