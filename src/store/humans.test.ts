import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase } from '../../test/support/app.ts';
import { ManualClock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import { hashSecret } from '../lib/secrets.ts';
import { addHuman, authenticatePersonalToken, createToken, listTokens, revokeToken } from './humans.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
const clock = new ManualClock();

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
});
afterAll(async () => db.drop());

describe('addHuman', () => {
  it('refuses a duplicate handle and a malformed one', async () => {
    await addHuman(sql, { handle: 'ops' });
    await expect(addHuman(sql, { handle: 'ops' })).rejects.toMatchObject({ code: 'conflict' });
    await expect(addHuman(sql, { handle: 'Not Valid' })).rejects.toMatchObject({ code: 'invalid_argument', details: { field: 'handle' } });
  });
});

describe('personal tokens', () => {
  it('mints sbp_ + 32 random bytes, keeps only the hash and prefix, and authenticates', async () => {
    await addHuman(sql, { handle: 'tok' });
    const { token, record } = await createToken(sql, { handle: 'tok', name: 'laptop' });
    expect(token).toMatch(/^sbp_[A-Za-z0-9_-]{43}$/);
    expect(record.token_prefix).toBe(token.slice(0, 12));
    const [row] = await sql`select token_hash from human_tokens where id = ${record.id}`;
    expect(row!.token_hash).toBe(hashSecret(token));
    expect((await authenticatePersonalToken(sql, token, clock.now()))?.human.handle).toBe('tok');
    expect((await listTokens(sql, 'tok'))[0]!.last_used_at).toEqual(clock.now());
  });

  it('stops authenticating once revoked, by id or by prefix', async () => {
    await addHuman(sql, { handle: 'tok2' });
    const a = await createToken(sql, { handle: 'tok2' });
    const b = await createToken(sql, { handle: 'tok2' });
    await revokeToken(sql, a.record.id, clock.now());
    await revokeToken(sql, b.record.token_prefix, clock.now());
    expect(await authenticatePersonalToken(sql, a.token, clock.now())).toBeNull();
    expect(await authenticatePersonalToken(sql, b.token, clock.now())).toBeNull();
    await expect(revokeToken(sql, a.record.id, clock.now())).rejects.toMatchObject({ code: 'conflict' });
    await expect(revokeToken(sql, 'sbp_nope', clock.now())).rejects.toMatchObject({ code: 'not_found' });
  });

  it('never accepts an endpoint credential', async () => {
    expect(await authenticatePersonalToken(sql, 'sbk_' + 'a'.repeat(43), clock.now())).toBeNull();
  });
});
