import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/app.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { consumeLoginLink, createLoginLink } from '../src/store/web-sessions.ts';
import { connectAgent, type Agent } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './support/app.ts';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.ts';

/**
 * The database goes away under a running server (here a TCP relay in front of PostgreSQL is cut,
 * so the connections drop and new ones are refused). Every surface answers "unavailable, retry"
 * — 503 with Retry-After on HTTP, the `unavailable` code in an MCP tool error — never a 500,
 * and serves again as soon as the database is back.
 */

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let proxy: TcpProxy;
let app: App & { clock: ManualClock };
let api: ReturnType<typeof apiCaller>;
let agent: Agent;
let boardCookie = '';
const clients: Client[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  const target = new URL(db.url);
  proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) });
  app = await startTestApp(proxy.url(db.url), new ManualClock(new Date()));
  const human = await humanWithToken(db.sql);
  api = apiCaller(app.url, human.token);
  const vended = await api('POST', '/api/v1/endpoints', { name: 'outage', queues: ['inbox'] });
  expect(vended.status).toBe(201);
  agent = await connectAgent(app, { slug: vended.json.slug, token: vended.json.token }, { track: clients });
  const link = await createLoginLink(db.sql, human.handle, app.clock.now());
  boardCookie = `sb_session=${(await consumeLoginLink(db.sql, link.token, app.clock.now()))!.sessionToken}`;
  await proxy.cut();
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await proxy?.restore().catch(() => {});
  await app?.stop();
  await proxy?.close();
  await db?.drop();
});

describe('while the database is unreachable', () => {
  it('/api/v1 answers 503 unavailable with Retry-After, not 500', async () => {
    const res = await api('GET', '/api/v1/endpoints');
    expect(res.status).toBe(503);
    expect(res.json).toMatchObject({ code: 'unavailable', error: 'the database is unreachable; retry shortly' });
    expect(res.headers.get('retry-after')).toBe('5');
  });

  it('an MCP tool call returns the unavailable code to the agent', async () => {
    const r = await agent.call('list_todos');
    expect(r.error).toContain('the database is unreachable');
    expect(r.details).toMatchObject({ code: 'unavailable' });
  });

  it('the board answers a 503 page saying to try again', async () => {
    const res = await fetch(`${app.url}/`, { headers: { cookie: boardCookie }, redirect: 'manual' });
    // The session cannot be looked up: the page says so rather than signing the person out.
    expect(res.status).toBe(503);
    expect(await res.text()).toContain('Try again shortly');
  });

  it('/healthz says db down', async () => {
    const res = await fetch(`${app.url}/healthz`);
    expect(res.status).toBe(503);
  });

  it('/readyz answers 503 naming the database and the LISTEN connection; /livez still answers 200', async () => {
    const ready = await fetch(`${app.url}/readyz`);
    expect(ready.status).toBe(503);
    const report = (await ready.json()) as { ready: boolean; checks: Record<string, string> };
    expect(report.ready).toBe(false);
    expect(report.checks.database).toMatch(/^unreachable: /);
    expect(report.checks.listen).not.toBe('ok');
    const live = await fetch(`${app.url}/livez`);
    expect(live.status).toBe(200);
    expect(await live.text()).toBe('ok\n');
  });
});

describe('once the database is back', () => {
  it('every surface serves again without a restart', async () => {
    await proxy.restore();
    const deadline = Date.now() + 10_000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      status = (await api('GET', '/api/v1/endpoints')).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 100));
    }
    expect(status).toBe(200);
    expect(await agent.call('list_todos')).toMatchObject({ todos: [] });
    const board = await fetch(`${app.url}/`, { headers: { cookie: boardCookie }, redirect: 'manual' });
    expect(board.status).toBe(200);
  });

  it('/readyz is 200 again once LISTEN has reconnected', async () => {
    const deadline = Date.now() + 15_000;
    let res = await fetch(`${app.url}/readyz`);
    while (Date.now() < deadline && res.status !== 200) {
      await new Promise((r) => setTimeout(r, 200));
      res = await fetch(`${app.url}/readyz`);
    }
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ready: true, checks: { database: 'ok', migrations: 'ok', listen: 'ok' } });
  });
});
