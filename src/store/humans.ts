import type { Sql } from '../db/connect.ts';
import { conflict, invalidArgument, notFound } from '../domain/errors.ts';
import { PERSONAL_TOKEN_PREFIX, hashSecret, mintSecret } from '../lib/secrets.ts';
import { isUuid } from '../domain/ids.ts';

export interface Human {
  id: string;
  handle: string;
  display_name: string | null;
  email: string | null;
  created_at: Date;
}

export interface HumanToken {
  id: string;
  human_id: string;
  name: string;
  token_prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const HANDLE = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export function validateHandle(handle: string): string {
  if (!HANDLE.test(handle)) {
    throw invalidArgument('handle', 'must be 1-64 characters of a-z, 0-9, ".", "_" or "-", starting with a letter or digit');
  }
  return handle;
}

export async function addHuman(sql: Sql, input: { handle: string; displayName?: string; email?: string }): Promise<Human> {
  const handle = validateHandle(input.handle);
  const [row] = await sql<Human[]>`
    insert into humans (handle, display_name, email)
    values (${handle}, ${input.displayName ?? null}, ${input.email ?? null})
    on conflict (handle) do nothing
    returning id, handle, display_name, email, created_at`;
  if (!row) throw conflict(`a human with handle "${handle}" already exists`);
  return row;
}

export async function listHumans(sql: Sql): Promise<Human[]> {
  return sql<Human[]>`select id, handle, display_name, email, created_at from humans order by handle`;
}

/** A human's handle by id; null for an unknown id (or one that is not a UUID). */
export async function handleOf(sql: Sql, humanId: string): Promise<string | null> {
  if (!isUuid(humanId)) return null;
  const [row] = await sql<{ handle: string }[]>`select handle from humans where id = ${humanId}`;
  return row?.handle ?? null;
}

/** A human by id; null for an unknown id. */
export async function getHumanById(sql: Sql, humanId: string): Promise<Human | null> {
  if (!isUuid(humanId)) return null;
  const [row] = await sql<Human[]>`select id, handle, display_name, email, created_at from humans where id = ${humanId}`;
  return row ?? null;
}

export async function getHumanByHandle(sql: Sql, handle: string): Promise<Human> {
  const [row] = await sql<Human[]>`
    select id, handle, display_name, email, created_at from humans where handle = ${handle}`;
  if (!row) throw notFound(`no human with handle "${handle}"`);
  return row;
}

export async function createToken(
  sql: Sql,
  input: { handle: string; name?: string },
): Promise<{ token: string; record: HumanToken }> {
  const human = await getHumanByHandle(sql, input.handle);
  const name = (input.name ?? '').trim();
  if (name.length > 100) throw invalidArgument('name', 'must be at most 100 characters');
  const secret = mintSecret(PERSONAL_TOKEN_PREFIX);
  const [record] = await sql<HumanToken[]>`
    insert into human_tokens (human_id, name, token_hash, token_prefix)
    values (${human.id}, ${name}, ${secret.hash}, ${secret.displayPrefix})
    returning id, human_id, name, token_prefix, created_at, last_used_at, revoked_at`;
  return { token: secret.plaintext, record: record! };
}

export async function listTokens(sql: Sql, handle: string): Promise<HumanToken[]> {
  const human = await getHumanByHandle(sql, handle);
  return sql<HumanToken[]>`
    select id, human_id, name, token_prefix, created_at, last_used_at, revoked_at
    from human_tokens where human_id = ${human.id} order by created_at desc`;
}

/** Revokes by token id or by its display prefix (`sbp_xxxxxxxx`). */
export async function revokeToken(sql: Sql, ref: string, now: Date): Promise<HumanToken> {
  const byId = isUuid(ref);
  const matches = await sql<HumanToken[]>`
    select id, human_id, name, token_prefix, created_at, last_used_at, revoked_at
    from human_tokens where ${byId ? sql`id = ${ref}::uuid` : sql`token_prefix = ${ref}`}`;
  if (matches.length === 0) throw notFound(`no token with id or prefix "${ref}"`);
  if (matches.length > 1) throw conflict(`prefix "${ref}" matches ${matches.length} tokens; revoke by id`);
  const target = matches[0]!;
  if (target.revoked_at) throw conflict('token is already revoked');
  const [row] = await sql<HumanToken[]>`
    update human_tokens set revoked_at = ${now} where id = ${target.id} and revoked_at is null
    returning id, human_id, name, token_prefix, created_at, last_used_at, revoked_at`;
  if (!row) throw conflict('token is already revoked');
  return row;
}

/**
 * Resolves a presented personal token to its human, or null. Stamps last_used_at at most once a
 * minute so a busy client does not turn every read into a write.
 */
export async function authenticatePersonalToken(
  sql: Sql,
  presented: string,
  now: Date,
): Promise<{ human: Human; tokenId: string } | null> {
  if (!presented.startsWith(PERSONAL_TOKEN_PREFIX)) return null;
  const [row] = await sql<(Human & { token_id: string })[]>`
    with token as (
      select id, human_id, last_used_at from human_tokens
      where token_hash = ${hashSecret(presented)} and revoked_at is null
    ), stamp as (
      update human_tokens set last_used_at = ${now}
      where id = (select id from token)
        and (last_used_at is null or last_used_at < ${now}::timestamptz - interval '60 seconds')
    )
    select h.id, h.handle, h.display_name, h.email, h.created_at, token.id as token_id
    from token join humans h on h.id = token.human_id`;
  if (!row) return null;
  const { token_id, ...human } = row;
  return { human, tokenId: token_id };
}

/** Whether this exact personal token exists and was revoked: only its holder can ask, by presenting it. */
export async function personalTokenRevoked(sql: Sql, presented: string): Promise<boolean> {
  if (!presented.startsWith(PERSONAL_TOKEN_PREFIX)) return false;
  const [row] = await sql<{ revoked: boolean }[]>`
    select exists (select 1 from human_tokens where token_hash = ${hashSecret(presented)} and revoked_at is not null) as revoked`;
  return row?.revoked ?? false;
}

/** What a sign-in at an OpenID Connect provider proved about a person. */
export interface OidcIdentityInput {
  issuer: string;
  subject: string;
  name: string | null;
  email: string | null;
  emailVerified: boolean;
  preferredUsername: string | null;
}

/** A handle for a human first seen through a provider: from their username or email, made valid. */
export function handleCandidate(identity: Pick<OidcIdentityInput, 'preferredUsername' | 'email' | 'name'>): string {
  const source = identity.preferredUsername ?? identity.email?.split('@')[0] ?? identity.name ?? '';
  const cleaned = source
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 56)
    .replace(/[._-]+$/, '');
  return cleaned === '' ? 'user' : cleaned;
}

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === '23505';

/**
 * The human behind an OpenID Connect identity, keyed on (issuer, subject):
 * 1. the human already bound to it (name and email refreshed from the provider);
 * 2. else the one unbound human whose email the provider says is verified and equal — a human an
 *    operator added with `admin human add --email`, who now signs in to the board — bound from now on;
 * 3. else a new human, with a handle from the username or email (suffixed -2, -3… when taken).
 */
export async function humanForOidcIdentity(sql: Sql, identity: OidcIdentityInput): Promise<{ human: Human; created: boolean; linked: boolean }> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await sql.begin(async (tx) => {
        const [bound] = await tx<Human[]>`
          update humans set display_name = coalesce(${identity.name}, display_name), email = coalesce(${identity.email}, email)
          where oidc_issuer = ${identity.issuer} and oidc_subject = ${identity.subject}
          returning id, handle, display_name, email, created_at`;
        if (bound) return { human: bound, created: false, linked: false };

        if (identity.email && identity.emailVerified) {
          const matches = await tx<Human[]>`
            select id, handle, display_name, email, created_at from humans
            where oidc_subject is null and lower(email) = lower(${identity.email})
            for update`;
          if (matches.length === 1) {
            const [linked] = await tx<Human[]>`
              update humans set oidc_issuer = ${identity.issuer}, oidc_subject = ${identity.subject},
                display_name = coalesce(display_name, ${identity.name})
              where id = ${matches[0]!.id}
              returning id, handle, display_name, email, created_at`;
            return { human: linked!, created: false, linked: true };
          }
        }

        const base = handleCandidate(identity);
        for (let n = 1; n <= 100; n += 1) {
          const handle = n === 1 ? base : `${base}-${n}`;
          const [row] = await tx<Human[]>`
            insert into humans (handle, display_name, email, oidc_issuer, oidc_subject)
            values (${handle}, ${identity.name}, ${identity.email}, ${identity.issuer}, ${identity.subject})
            on conflict (handle) do nothing
            returning id, handle, display_name, email, created_at`;
          if (row) return { human: row, created: true, linked: false };
        }
        throw conflict(`no free handle near "${base}"; add the human with switchboard admin human add`);
      });
    } catch (err) {
      // Two first sign-ins of one identity at once: the loser finds the winner's row on retry.
      if (attempt === 0 && isUniqueViolation(err)) continue;
      throw err;
    }
  }
}
