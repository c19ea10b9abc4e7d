import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';
import { ManualClock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import { DEFAULT_VERBS } from '../domain/scope.ts';
import { hashSecret } from '../lib/secrets.ts';
import { authenticateEndpointCredentialUnscoped, makeSlug, resolveOwnEndpoint, revokeOwnEndpoint, vendEndpoint } from './endpoints.ts';
import { addHuman } from './humans.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
const clock = new ManualClock('2026-03-02T10:00:00Z');

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
});
afterAll(async () => db.drop());

describe('makeSlug', () => {
  it.each([
    ['Review Bot', /^review-bot-[0-9a-f]{8}$/],
    ['  --Ops__Helper!!  ', /^ops-helper-[0-9a-f]{8}$/],
    ['日本語', /^endpoint-[0-9a-f]{8}$/],
  ])('cleans %j', (name, shape) => {
    expect(makeSlug(name)).toMatch(shape);
  });
});

describe('vendEndpoint', () => {
  it('stores only the SHA-256 of the credential and a 12-character prefix', async () => {
    const h = await addHuman(sql, { handle: 'vend-a' });
    const { endpoint, credential } = await vendEndpoint(sql, h.id, { name: 'review-bot', queues: ['reviews', 'inbox'] }, clock.now());
    expect(credential).toMatch(/^sbk_[A-Za-z0-9_-]{43}$/);
    const [row] = await sql`select * from endpoints where id = ${endpoint.id}`;
    expect(row!.credential_hash).toBe(hashSecret(credential));
    expect(row!.credential_prefix).toBe(credential.slice(0, 12));
    expect(JSON.stringify(row)).not.toContain(credential);
    expect(endpoint).toMatchObject({ scope_queues: ['reviews', 'inbox'], scope_verbs: [...DEFAULT_VERBS], state: 'active', agent_name: 'review-bot' });
  });

  it('creates the agent and endpoint together or not at all', async () => {
    const h = await addHuman(sql, { handle: 'vend-b' });
    const count = async () => (await sql`select (select count(*) from agents)::int + (select count(*) from endpoints)::int as n`)[0]!.n;
    const before = await count();
    await expect(vendEndpoint(sql, h.id, { name: 'x', verbs: ['no_such_verb'] }, clock.now())).rejects.toMatchObject({ code: 'invalid_argument' });
    expect(await count()).toBe(before);
  });
});

describe('resolveOwnEndpoint / revokeOwnEndpoint', () => {
  it('resolves by slug or id among the caller\'s own endpoints only', async () => {
    const owner = await addHuman(sql, { handle: 'res-a' });
    const other = await addHuman(sql, { handle: 'res-b' });
    const { endpoint } = await vendEndpoint(sql, owner.id, { name: 'bot' }, clock.now());
    expect((await resolveOwnEndpoint(sql, owner.id, endpoint.slug)).id).toBe(endpoint.id);
    expect((await resolveOwnEndpoint(sql, owner.id, endpoint.id)).id).toBe(endpoint.id);
    await expect(resolveOwnEndpoint(sql, other.id, endpoint.slug)).rejects.toMatchObject({ code: 'not_found' });
    await expect(resolveOwnEndpoint(sql, other.id, endpoint.id)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('revocation stops the credential resolving and cannot be repeated', async () => {
    const h = await addHuman(sql, { handle: 'rev-a' });
    const { endpoint, credential } = await vendEndpoint(sql, h.id, { name: 'bot' }, clock.now());
    expect((await authenticateEndpointCredentialUnscoped(sql, credential, clock.now()))?.id).toBe(endpoint.id);
    const { endpoint: revoked } = await revokeOwnEndpoint(sql, h.id, endpoint.slug, clock.now());
    expect(revoked.state).toBe('revoked');
    expect(await authenticateEndpointCredentialUnscoped(sql, credential, clock.now())).toBeNull();
    await expect(revokeOwnEndpoint(sql, h.id, endpoint.slug, clock.now())).rejects.toMatchObject({ code: 'conflict', details: { state: 'revoked' } });
  });

  it('stamps last_seen_at when the credential authenticates', async () => {
    const h = await addHuman(sql, { handle: 'seen-a' });
    const { endpoint, credential } = await vendEndpoint(sql, h.id, { name: 'bot' }, clock.now());
    expect(endpoint.last_seen_at).toBeNull();
    const at = clock.advance(5000);
    expect((await authenticateEndpointCredentialUnscoped(sql, credential, at))?.last_seen_at).toEqual(at);
    expect(await authenticateEndpointCredentialUnscoped(sql, 'sbk_wrong', at)).toBeNull();
    expect(await authenticateEndpointCredentialUnscoped(sql, 'sbp_' + credential.slice(4), at)).toBeNull();
  });
});
