import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/app.ts';
import { listMigrations } from '../src/db/migrate.ts';
import { connect, type Sql } from '../src/db/connect.ts';
import { apiCaller, humanWithToken, startTestApp } from './support/app.ts';
import { createTestDatabase, type TestDatabase } from './support/database.ts';
import { push, vend } from './support/fixtures.ts';

let db: TestDatabase;
let sql: Sql;
let a: App;
let b: App;

beforeAll(async () => {
  db = await createTestDatabase();
  // Both instances start against an empty database at the same moment.
  [a, b] = await Promise.all([startTestApp(db.url), startTestApp(db.url)]);
  sql = connect(db.url, { max: 2 });
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await sql?.end({ timeout: 5 });
  await db.drop();
});

describe('two instances on one database', () => {
  it('both come up with the schema migrated once', async () => {
    const rows = await sql`select version from schema_migrations order by version`;
    expect(rows.map((r) => r.version)).toEqual((await listMigrations()).map((m) => m.version));
    for (const app of [a, b]) expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  });

  it('share state: an endpoint vended and a todo pushed through A are listed by B', async () => {
    const human = await humanWithToken(sql);
    const viaA = apiCaller(a.url, human.token);
    const viaB = apiCaller(b.url, human.token);
    const e = await vend(viaA, { name: 'shared', queues: ['reviews'] });
    const pushed = await push(viaA, e, { title: 'Review PR 12', payload: { pr: 12 } });
    const list = await viaB('GET', `/api/v1/endpoints/${e.slug}/todos`);
    expect(list.json.todos.map((t: { id: string }) => t.id)).toEqual([pushed.id]);
    const revoke = await viaB('POST', `/api/v1/endpoints/${e.slug}/revoke`);
    expect(revoke.status).toBe(200);
    expect((await viaA('POST', `/api/v1/endpoints/${e.slug}/revoke`)).status).toBe(409);
  });
});
