import { randomBytes } from 'node:crypto';
import type { Sql, TxSql } from '../db/connect.ts';
import { conflict, invalidArgument, isSwitchboardError, notFound } from '../domain/errors.ts';
import { normalizeQueues, normalizeVerbs } from '../domain/scope.ts';
import { ENDPOINT_CREDENTIAL_PREFIX, hashSecret, mintSecret } from '../lib/secrets.ts';
import { notify } from './channels.ts';
import { live } from './todos/predicates.ts';
import { revokeEndpointGrants } from './oauth/grants.ts';
import { isUuid } from '../domain/ids.ts';
import { hasControlCharacters } from '../domain/neutralize.ts';

export interface Endpoint {
  id: string;
  agent_id: string;
  agent_name: string;
  owner_human_id: string;
  slug: string;
  credential_prefix: string;
  scope_queues: string[];
  scope_verbs: string[];
  state: 'active' | 'revoked';
  created_at: Date;
  revoked_at: Date | null;
  last_seen_at: Date | null;
  shift: string | null;
  presence_override: 'in' | 'out' | null;
  override_until: Date | null;
  override_set_at: Date | null;
  override_by: string | null;
  webhook_max: number;
}

const MAX_AGENT_NAME = 100;

/** The columns every endpoint read returns; `e` is endpoints, `a` its agent. */
const endpointColumns = (sql: Sql | TxSql) => sql`
  e.id, e.agent_id, a.name as agent_name, a.owner_human_id, e.slug, e.credential_prefix,
  e.scope_queues, e.scope_verbs, e.state, e.created_at, e.revoked_at, e.last_seen_at,
  e.shift, e.presence_override, e.override_until, e.override_set_at, e.override_by, e.webhook_max`;

/** Lowercase, every run of other characters becomes one '-', trimmed, then '-' + 8 random hex. */
export function makeSlug(agentName: string): string {
  const base = agentName.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 48).replace(/-+$/, '');
  return `${base || 'endpoint'}-${randomBytes(4).toString('hex')}`;
}

export function validateAgentName(raw: unknown): string {
  if (typeof raw !== 'string') throw invalidArgument('name', 'is required and must be a string');
  const name = raw.trim();
  if (name === '') throw invalidArgument('name', 'must not be empty');
  if (name.length > MAX_AGENT_NAME) throw invalidArgument('name', `must be at most ${MAX_AGENT_NAME} characters`);
  if (hasControlCharacters(name)) throw invalidArgument('name', 'must not contain control characters');
  return name;
}

export interface VendInput {
  name: unknown;
  queues?: readonly unknown[];
  verbs?: readonly unknown[];
  /** The board form's one-time id: a second vend with the same id fails with `alreadyVended`. */
  vendRequest?: string;
}

/** A vend form sent twice; `endpointId` is the endpoint the first send made. */
export const alreadyVended = (endpointId: string) => conflict('this form already vended an endpoint; its credential was shown once', { endpoint_id: endpointId });

/** Creates the agent and its endpoint in one transaction. The credential is returned once, here. */
export async function vendEndpoint(
  sql: Sql,
  humanId: string,
  input: VendInput,
  now: Date,
): Promise<{ endpoint: Endpoint; credential: string }> {
  const name = validateAgentName(input.name);
  const queues = normalizeQueues(input.queues);
  const verbs = normalizeVerbs(input.verbs);
  const secret = mintSecret(ENDPOINT_CREDENTIAL_PREFIX);
  // Scoped to its owner: one human replaying another's form id vends their own endpoint.
  const vendRequest = input.vendRequest === undefined ? null : `${humanId}:${input.vendRequest}`;
  const endpoint = await sql.begin(async (tx) => {
    if (vendRequest !== null) {
      // Serialises two sends of one form; the unique index is the backstop.
      await tx`select pg_advisory_xact_lock(hashtext(${vendRequest}))`;
      const [done] = await tx<{ id: string }[]>`select id from endpoints where vend_request = ${vendRequest}`;
      if (done) throw alreadyVended(done.id);
    }
    const [agent] = await tx<{ id: string }[]>`
      insert into agents (owner_human_id, name, created_at) values (${humanId}, ${name}, ${now}) returning id`;
    const [row] = await tx<{ id: string }[]>`
      insert into endpoints (agent_id, slug, credential_hash, credential_prefix, scope_queues, scope_verbs, created_at, vend_request)
      values (${agent!.id}, ${makeSlug(name)}, ${secret.hash}, ${secret.displayPrefix}, ${tx.array(queues)}, ${tx.array(verbs)}, ${now}, ${vendRequest})
      returning id`;
    return getOwnEndpointById(tx, humanId, row!.id);
  });
  return { endpoint, credential: secret.plaintext };
}

async function getOwnEndpointById(sql: Sql | TxSql, humanId: string, id: string): Promise<Endpoint> {
  const [row] = await sql<Endpoint[]>`
    select ${endpointColumns(sql)} from endpoints e join agents a on a.id = e.agent_id
    where e.id = ${id} and a.owner_human_id = ${humanId}`;
  if (!row) throw endpointNotFound();
  return row;
}

/**
 * One page of a human's endpoints in one state, newest first (as listOwnEndpoints orders them), and
 * how many they have in that state: the board's endpoints page, which at 100,000 endpoints cannot
 * show them all (issue 40).
 */
export async function listOwnEndpointsPage(
  sql: Sql,
  humanId: string,
  state: 'active' | 'revoked',
  page: { offset: number; limit: number },
): Promise<{ rows: Endpoint[]; total: number }> {
  const [rows, [count]] = await Promise.all([
    sql<Endpoint[]>`
      select ${endpointColumns(sql)} from endpoints e join agents a on a.id = e.agent_id
      where a.owner_human_id = ${humanId} and e.state = ${state}
      order by e.created_at desc, e.id
      limit ${page.limit} offset ${page.offset}`,
    sql<{ n: number }[]>`
      select count(*)::int as n from endpoints e join agents a on a.id = e.agent_id
      where a.owner_human_id = ${humanId} and e.state = ${state}`,
  ]);
  return { rows: [...rows], total: count!.n };
}

/** Active endpoints first, then newest. */
export async function listOwnEndpoints(sql: Sql, humanId: string): Promise<Endpoint[]> {
  return sql<Endpoint[]>`
    select ${endpointColumns(sql)} from endpoints e join agents a on a.id = e.agent_id
    where a.owner_human_id = ${humanId}
    order by (e.state = 'active') desc, e.created_at desc, e.id`;
}

/** The one answer for an endpoint that does not exist or is not the caller's. */
export const endpointNotFound = () => notFound('no endpoint by that slug or id belongs to you');

/**
 * Resolves `{ref}` — a slug or an endpoint id — among the caller's own endpoints, in any state.
 * Another human's endpoint answers exactly like a missing one.
 */
export async function resolveOwnEndpoint(sql: Sql | TxSql, humanId: string, ref: string): Promise<Endpoint> {
  const byId = isUuid(ref);
  const [row] = await sql<Endpoint[]>`
    select ${endpointColumns(sql)} from endpoints e join agents a on a.id = e.agent_id
    where a.owner_human_id = ${humanId}
      and ${byId ? sql`(e.id = ${ref}::uuid or e.slug = ${ref})` : sql`e.slug = ${ref}`}`;
  if (!row) throw endpointNotFound();
  return row;
}

export const endpointRevoked = (endpoint: Pick<Endpoint, 'slug' | 'state'>) =>
  conflict(`endpoint ${endpoint.slug} is revoked`, { slug: endpoint.slug, state: endpoint.state });

/** Whether an error is the refusal above (a write that found its endpoint revoked). */
export const isEndpointRevoked = (err: unknown): boolean =>
  isSwitchboardError(err) && err.code === 'conflict' && err.details.state === 'revoked';

/**
 * Revokes an endpoint: the credential stops resolving and, in the same transaction, every live
 * todo (pending, claimed, or waiting on a retry) is dead-lettered with `endpoint_revoked`, except
 * self-test todos, which are simply ended; its MCP sessions are deleted from the directory.
 * Other instances learn of it from the `endpoint_revoked` notification, sent at commit.
 */
export async function revokeOwnEndpoint(
  sql: Sql,
  humanId: string,
  ref: string,
  now: Date,
): Promise<{ endpoint: Endpoint; deadLettered: number }> {
  return sql.begin(async (tx) => {
    const current = await resolveOwnEndpoint(tx, humanId, ref);
    const [updated] = await tx<{ id: string }[]>`
      update endpoints set state = 'revoked', revoked_at = ${now}
      where id = ${current.id} and state = 'active' returning id`;
    if (!updated) throw conflict(`endpoint ${current.slug} is already revoked`, { slug: current.slug, state: current.state });
    const dead = await tx`
      update todos set state = 'failed', owner = null, lease_expires_at = null, lease_token_hash = null, next_retry_at = null,
        result = ${tx.json({ error: 'endpoint_revoked', detail: `endpoint ${current.slug} was revoked` })},
        completed_at = ${now}, updated_at = ${now}
      where endpoint_id = ${current.id} and not synthetic and ${live(tx)}`;
    // A self-test todo is no work to lose: it is ended, not counted as a dead letter.
    await tx`
      update todos set state = 'done', owner = null, lease_expires_at = null, lease_token_hash = null, next_retry_at = null,
        result = ${tx.json({ self_test: true, note: 'ended: the endpoint was revoked' })}, completed_at = ${now}, updated_at = ${now}
      where endpoint_id = ${current.id} and synthetic and ${live(tx)}`;
    // Its OAuth grants die with it: their tokens stop resolving and unspent codes expire.
    await revokeEndpointGrants(tx, current.id, now);
    // Its MCP sessions end on every instance: they hear endpoint_revoked and drop their copies.
    await tx`delete from mcp_sessions where endpoint_id = ${current.id}`;
    await notify(tx, 'endpoint_revoked', { endpointId: current.id });
    return { endpoint: await getOwnEndpointById(tx, humanId, current.id), deadLettered: dead.count };
  });
}

/**
 * Resolves an endpoint credential for the MCP transport. Crosses tenants by design: the
 * credential itself is the grant. Returns null for unknown or revoked credentials, and for a
 * credential presented at another endpoint's URL when `slug` is given (nothing is stamped then).
 */
export async function authenticateEndpointCredentialUnscoped(
  sql: Sql,
  presented: string,
  now: Date,
  slug?: string,
): Promise<Endpoint | null> {
  if (!presented.startsWith(ENDPOINT_CREDENTIAL_PREFIX)) return null;
  // last_seen_at moves at most once a minute, so a busy agent does not write on every request.
  const [row] = await sql<Endpoint[]>`
    with hit as (
      select e.id from endpoints e where e.credential_hash = ${hashSecret(presented)} and e.state = 'active'
        ${slug === undefined ? sql`` : sql`and e.slug = ${slug}`}
    ), stamp as (
      update endpoints set last_seen_at = ${now}
      where id = (select id from hit)
        and (last_seen_at is null or last_seen_at < ${now}::timestamptz - interval '60 seconds')
      returning id, last_seen_at
    )
    select ${endpointColumns(sql)}, coalesce((select last_seen_at from stamp), e.last_seen_at) as last_seen_at
    from endpoints e join agents a on a.id = e.agent_id where e.id = (select id from hit)`;
  return row ?? null;
}

/**
 * The active endpoint an OAuth grant opens, only at its own URL (`slug`). Crosses tenants by design:
 * the access token that named it is the grant (store/oauth/tokens.ts resolved it).
 */
export async function activeEndpointAtUnscoped(sql: Sql, endpointId: string, slug: string): Promise<Endpoint | null> {
  const [row] = await sql<Endpoint[]>`
    select ${endpointColumns(sql)} from endpoints e join agents a on a.id = e.agent_id
    where e.id = ${endpointId} and e.slug = ${slug} and e.state = 'active'`;
  return row ?? null;
}

/** Of the given endpoint ids, those no longer active (for catching up on missed revocations). */
export async function inactiveEndpointIdsUnscoped(sql: Sql, ids: readonly string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await sql<{ id: string }[]>`
    select id from endpoints where id = any(${sql.array([...ids])}::uuid[]) and state <> 'active'`;
  return rows.map((r) => r.id);
}
