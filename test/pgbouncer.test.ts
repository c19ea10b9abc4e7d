import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/app.ts';
import { connect, type Sql } from '../src/db/connect.ts';
import { listMigrations } from '../src/db/migrate.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { createLogger } from '../src/lib/log.ts';
import { connectAgent, until, type Agent } from './support/agents.ts';
import { apiCaller, humanWithToken, startTestApp } from './support/app.ts';
import { createTestDatabase, type TestDatabase } from './support/database.ts';
import { push, vend, type Api, type Vended } from './support/fixtures.ts';
import { freePort } from './support/processes.ts';
import { PGBOUNCER_BIN, pgbouncerInstalled, startPgBouncer, type PgBouncer } from './support/pgbouncer.ts';

/**
 * Two instances behind a real PgBouncer in transaction mode with two server connections: every
 * statement of both instances' pools interleaves on those two, so a named prepared statement or a
 * LISTEN through the pooler would break. SWITCHBOARD_LISTEN_DATABASE_URL gives LISTEN (and the
 * migrations) a direct connection; the main pool sends unnamed statements.
 */

const POOL_SIZE = 2;

if (!pgbouncerInstalled()) console.warn(`[pgbouncer] skipped: ${PGBOUNCER_BIN} is not installed (apt-get install pgbouncer)`);

let db: TestDatabase;
let bouncer: PgBouncer;
let check: Sql;
let a: App;
let b: App;
let api: { a: Api; b: Api };
let e: Vended;
let agent: Agent;
const clients: Client[] = [];
let logged = '';
const sink = new Writable({
  write(chunk, _enc, done) {
    logged += chunk.toString();
    done();
  },
});

/** The test server trusts local connections: a password in a URL is never asked for, only logged if we leaked it. */
const withPassword = (url: string, password: string) => Object.assign(new URL(url), { password }).toString();

/** Backends on the test database, by who opened them (the direct pools name themselves). */
const backends = async () => {
  const rows = await check<{ application_name: string; query: string }[]>`
    select application_name, query from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`;
  return {
    listening: rows.filter((r) => r.application_name === 'switchboard-listen' && /^listen /i.test(r.query)).length,
    pooled: rows.filter((r) => r.application_name !== 'switchboard-listen').length,
  };
};

/** A JSON-RPC call on an existing MCP session, sent to whichever instance `app` is. */
async function callOn(app: App, sessionId: string, name: string, args: Record<string, unknown> = {}) {
  const res = await fetch(`${app.url}/mcp/${e.slug}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${e.token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-session-id': sessionId,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }),
  });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  const rpc = JSON.parse(text) as { result: { content: { text: string }[]; isError?: boolean } };
  expect(rpc.result.isError, rpc.result.content[0]?.text).toBeFalsy();
  return JSON.parse(rpc.result.content[0]!.text);
}

describe.skipIf(!pgbouncerInstalled())('two instances behind PgBouncer (transaction mode) with a direct listen URL', () => {
  beforeAll(async () => {
    db = await createTestDatabase();
    bouncer = await startPgBouncer({ upstreamUrl: db.url, poolMode: 'transaction', poolSize: POOL_SIZE });
    check = connect(db.url, { max: 1, applicationName: 'pgbouncer-test' });
    const clock = new ManualClock();
    const pooled = withPassword(bouncer.url(db.url), 'pooled-secret');
    const env = { SWITCHBOARD_LISTEN_DATABASE_URL: withPassword(db.url, 'direct-secret') };
    // Both start on an empty database at once: the migrations race on the direct URL.
    [a, b] = await Promise.all([startTestApp(pooled, clock, { env, log: createLogger('debug', sink) }), startTestApp(pooled, clock, { env })]);
    const human = await humanWithToken(a.sql);
    api = { a: apiCaller(a.url, human.token), b: apiCaller(b.url, human.token) };
    e = await vend(api.a, { name: 'pooled', queues: ['jobs'] });
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await Promise.all([a?.stop(), b?.stop()]);
    await check?.end({ timeout: 5 });
    await bouncer?.stop();
    await db?.drop();
  });

  it('both instances come up with every migration applied once; each LISTENs on its direct connection', async () => {
    const rows = await check<{ version: string }[]>`select version from schema_migrations order by version`;
    expect(rows.map((r) => r.version)).toEqual((await listMigrations()).map((m) => m.version));
    for (const app of [a, b]) expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
    await until(async () => (await backends()).listening === 2, 'one LISTEN connection per instance');
  });

  it('logs both databases without their passwords', () => {
    expect(logged).toContain('"listen_database":"postgres://postgres:***@127.0.0.1');
    expect(logged).not.toMatch(/pooled-secret|direct-secret/);
  });

  it('refuses to start when the listen URL cannot be reached, naming the variable and not the password', async () => {
    const unreachable = `postgres://postgres:hunter2@127.0.0.1:${await freePort()}/nowhere`;
    const err = await startTestApp(bouncer.url(db.url), new ManualClock(), { env: { SWITCHBOARD_LISTEN_DATABASE_URL: unreachable } }).then(
      () => new Error('started'),
      (e: Error) => e,
    );
    expect(err.message).toContain('(SWITCHBOARD_LISTEN_DATABASE_URL)');
    expect(err.message).toContain('postgres://postgres:***@127.0.0.1');
    expect(err.message).not.toContain('hunter2');
  });

  it('an agent initialized on A is served by B; a todo pushed on B rings its stream on A; it claims through B and completes on A', async () => {
    agent = await connectAgent(a, e, { track: clients });
    const pushed = await push(api.b, e, { title: 'through the pooler', payload: { n: 1 } });
    const rang = () => agent.heard.filter((n) => n.params.meta.todo_id === pushed.id);
    await until(() => rang().length === 1, `the doorbell of ${pushed.id} on A`);

    const claimed = await callOn(b, agent.sessionId, 'claim_next');
    expect(claimed).toMatchObject({ empty: false, todo: { id: pushed.id, state: 'claimed' } });
    expect(await agent.call('complete', { id: pushed.id, result: { ok: true } })).toMatchObject({ id: pushed.id, state: 'done' });
    expect(rang()).toHaveLength(1);
  });

  it(`a burst through both instances shares ${POOL_SIZE} server connections, and every statement answers`, async () => {
    const pushes = Array.from({ length: 20 }, (_, n) => push(n % 2 ? api.a : api.b, e, { title: `burst ${n}`, payload: { n } }));
    const reads = Array.from({ length: 20 }, (_, n) => (n % 2 ? api.b : api.a)('GET', `/api/v1/endpoints/${e.slug}/todos`));
    const pushed = await Promise.all(pushes);
    for (const r of await Promise.all(reads)) expect(r.status, r.text).toBe(200);
    expect((await backends()).pooled).toBeLessThanOrEqual(POOL_SIZE);
    expect(await bouncer.clients(db.name)).toBeGreaterThan(2 * POOL_SIZE);

    // Every one is claimed exactly once, by calls spread over both instances on the one session.
    const ids = new Set<string>();
    for (let n = 0; n < pushed.length; n++) {
      const r = n % 2 ? await agent.call('claim_next') : await callOn(b, agent.sessionId, 'claim_next');
      expect(r.empty).toBe(false);
      ids.add(r.todo.id as string);
    }
    expect([...ids].sort()).toEqual(pushed.map((p) => p.id).sort());
    expect(await agent.call('claim_next')).toMatchObject({ empty: true });
  });
});
