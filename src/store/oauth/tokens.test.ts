import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../../test/support/app.ts';
import type { Sql } from '../../db/connect.ts';
import { s256 } from '../../domain/oauth/pkce.ts';
import { addHuman } from '../humans.ts';
import { registerClient } from './clients.ts';
import { createGrantWithCode } from './grants.ts';
import { deleteExpiredOAuthRowsUnscoped, exchangeCode, rotateRefreshToken } from './tokens.ts';

// What the retention loop removes of the OAuth tables, and what it keeps.

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let humanId: string;
const life = { accessSeconds: 3600, refreshSeconds: 10 * 86_400 };
const day = (n: number) => new Date(Date.UTC(2026, 0, n));

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  humanId = (await addHuman(sql, { handle: 'oauth-retention' })).id;
});
afterAll(async () => db.drop());

const count = async (table: string) => (await sql.unsafe(`select count(*)::int as n from ${table}`))[0]!.n as number;

describe('deleteExpiredOAuthRowsUnscoped', () => {
  it('drops expired tokens and codes, revoked grants left empty and clients that never got a grant; keeps what is live', async () => {
    const idle = await registerClient(sql, { client_name: 'never used', redirect_uris: ['http://127.0.0.1/cb'] }, day(1));
    const used = await registerClient(sql, { client_name: 'used', redirect_uris: ['http://127.0.0.1/cb'] }, day(1));
    const verifier = 'v'.repeat(43);
    await createGrantWithCode(sql, { clientId: used.client_id, humanId, endpointId: null, resource: 'http://x/api', code: { plaintext: 'sbc_one', redirectUri: 'http://127.0.0.1/cb', challenge: s256(verifier), expiresAt: day(2) } }, day(1));
    const issued = await exchangeCode(sql, { code: 'sbc_one', clientId: used.client_id, redirectUri: undefined, resource: undefined, proves: (c) => c === s256(verifier) }, life, day(1));
    expect(issued.ok).toBe(true);
    if (!issued.ok) return;
    // A rotation on day 5: the first refresh token is spent (kept until it would have expired, so a replay is still caught).
    expect((await rotateRefreshToken(sql, issued.tokens.refresh_token, used.client_id, undefined, life, day(5))).ok).toBe(true);

    await deleteExpiredOAuthRowsUnscoped(sql, day(3), 100);
    expect(await sql`select client_id from oauth_clients where client_id = ${idle.client_id}`).toEqual([]);
    expect((await sql`select client_id from oauth_clients where client_id = ${used.client_id}`).length).toBe(1);
    // The day-1 access token and the code expired before day 3; both refresh tokens and the day-5 access token remain.
    expect(await count('oauth_codes')).toBe(0);
    expect((await sql`select kind from oauth_tokens order by kind`).map((r) => r.kind)).toEqual(['access', 'refresh', 'refresh']);
    expect(await count('oauth_grants')).toBe(1);
  });
});
