// The fixtures every end-to-end test file uses: a migrated database and a running app of the file's
// own (withApp), operators (a human and a personal token), and the two API writes almost every test
// starts from (vend an endpoint, push a todo). One definition each, so a change in the wire answers
// is fixed here once.

import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import type { PushResult, VendResult } from '../../src/api/wire.ts';
import type { App } from '../../src/app.ts';
import type { Sql } from '../../src/db/connect.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { addHuman, createToken } from '../../src/store/humans.ts';
import { connectAgent, type Agent } from './agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp, type TestAppOptions } from './app.ts';

export { apiCaller, humanWithToken, migratedDatabase, startTestApp };

/** An API caller: `(method, path, body?, headers?) => { status, headers, json, text }`. */
export type Api = ReturnType<typeof apiCaller>;
export type ApiResponse = Awaited<ReturnType<Api>>;
export type TestApp = App & { clock: ManualClock };
export type TestDb = Awaited<ReturnType<typeof migratedDatabase>>;

/** What `POST /api/v1/endpoints` answers. */
export type Vended = VendResult;

/** What `POST /api/v1/endpoints/{ref}/todos` answers. */
export type Pushed = PushResult;

/** A human with a personal token, and an API caller carrying that token. */
export interface Operator {
  id: string;
  handle: string;
  token: string;
  call: Api;
}

let handleSeq = 0;

/** A new human (handle, display name and email as given) with a personal token named `tokenName`. */
export async function operator(
  sql: Sql,
  baseUrl: string,
  opts: { handle?: string; displayName?: string; email?: string; tokenName?: string } = {},
): Promise<Operator> {
  const { handle = `op-${process.pid}-${++handleSeq}`, tokenName, ...profile } = opts;
  const human = await addHuman(sql, { handle, ...profile });
  const { token } = await createToken(sql, tokenName === undefined ? { handle } : { handle, name: tokenName });
  return { id: human.id, handle, token, call: apiCaller(baseUrl, token) };
}

/** POST /api/v1/endpoints with exactly `body`; fails the test unless it answers 201. */
export async function vend(via: Api, body: Record<string, unknown> = { name: 'agent', queues: ['reviews'] }): Promise<Vended> {
  const res = await via('POST', '/api/v1/endpoints', body);
  expect(res.status, res.text).toBe(201);
  return res.json as Vended;
}

export const pushPath = (ref: string) => `/api/v1/endpoints/${encodeURIComponent(ref)}/todos`;

/** POST /api/v1/endpoints/{ref}/todos with exactly `body`; fails the test unless it answers 201. */
export async function push(via: Api, ref: string | Pick<Vended, 'slug'>, body: Record<string, unknown>): Promise<Pushed> {
  const res = await via('POST', pushPath(typeof ref === 'string' ? ref : ref.slug), body);
  expect(res.status, res.text).toBe(201);
  return res.json as Pushed;
}

export interface WithAppOptions extends TestAppOptions {
  /** The app's clock (default: a ManualClock at its default time). */
  clock?: ManualClock;
  /** Moves the clock this many ms before each test, which refills the clock-driven rate limiters. */
  refillMs?: number;
}

/** What withApp fills in before the file's tests run. */
export interface AppFixture {
  db: TestDb;
  sql: Sql;
  app: TestApp;
  /** The file's operator and an API caller with their token. */
  human: { id: string; handle: string; token: string };
  api: Api;
  /** MCP clients to close after the file's tests. */
  clients: Client[];
  /** An SDK client connected to `on` (default: the file's app) as endpoint `e`, closed at the end. */
  agent(e: Pick<Vended, 'slug' | 'token'>, on?: App, name?: string): Promise<Agent>;
}

/**
 * Registers the hooks for a file's own migrated database, app and operator, and answers the
 * fixture they fill in (read its fields inside hooks and tests, not at the top level).
 */
export function withApp(opts: WithAppOptions = {}): AppFixture {
  const { clock, refillMs, ...appOptions } = opts;
  const fixture = {
    clients: [] as Client[],
    agent: (e: Pick<Vended, 'slug' | 'token'>, on?: App, name = 'claude-code') =>
      connectAgent(on ?? fixture.app, e, { name, track: fixture.clients }),
  } as AppFixture;
  beforeAll(async () => {
    fixture.db = await migratedDatabase();
    fixture.sql = fixture.db.sql;
    fixture.app = await startTestApp(fixture.db.url, clock ?? new ManualClock(), appOptions);
    fixture.human = await humanWithToken(fixture.sql);
    fixture.api = apiCaller(fixture.app.url, fixture.human.token);
  });
  if (refillMs !== undefined) beforeEach(() => void fixture.app.clock.advance(refillMs));
  afterAll(async () => {
    await Promise.all(fixture.clients.map((c) => c.close().catch(() => {})));
    await fixture.app?.stop();
    await fixture.db?.drop();
  });
  return fixture;
}
