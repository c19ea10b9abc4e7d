// Shared by the /api/v1 test files (src/api/*.test.ts).

import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { apiCaller, migratedDatabase, startTestApp } from './app.ts';
import {
  operator as newOperator,
  push as pushVia,
  pushPath,
  vend as vendVia,
  type Operator,
  type Pushed,
  type Vended,
} from './fixtures.ts';
import type { Sql } from '../../src/db/connect.ts';
import { type Caller } from '../../src/store/todos/index.ts';

// The operator API over real HTTP against a real server and a real database of this file's own.
// Expected values are spelled out here rather than imported, so a drifting constant fails a test.

type Call = ReturnType<typeof apiCaller>;
export type Res = Awaited<ReturnType<Call>>;

let db: Awaited<ReturnType<typeof migratedDatabase>>;
export let sql: Sql;
export let app: Awaited<ReturnType<typeof startTestApp>>;
export let anon: Call;
export const NO_SUCH_UUID = '00000000-0000-4000-8000-000000000000';
export const wire = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

// ---------------------------------------------------------------------------------------------
// Helpers

export type { Operator, Vended };
export { pushPath };

export const operator = (opts: { displayName?: string; email?: string } = {}): Promise<Operator> =>
  newOperator(sql, app.baseUrl, { ...opts, tokenName: 'test' });

export const vend = (op: Operator, body: Record<string, unknown> = { name: 'worker' }): Promise<Vended> => vendVia(op.call, body);

export const push = (op: Operator, ref: string, body: Record<string, unknown>): Promise<Pushed> => pushVia(op.call, ref, body);

export async function revoke(op: Operator, ref: string): Promise<Res> {
  return op.call('POST', `/api/v1/endpoints/${encodeURIComponent(ref)}/revoke`);
}

/** Whole-database row counts: tests in a file run one at a time, so these are stable. */
export async function counts(): Promise<{ agents: number; endpoints: number; todos: number; events: number }> {
  const [row] = await sql<{ agents: number; endpoints: number; todos: number; events: number }[]>`
    select (select count(*)::int from agents) as agents, (select count(*)::int from endpoints) as endpoints,
           (select count(*)::int from todos) as todos, (select count(*)::int from events) as events`;
  return row!;
}

/** The agent side of an endpoint, for driving todos through the store. */
export async function agentOf(endpointId: string): Promise<Caller> {
  const [row] = await sql<{ agent_id: string; scope_queues: string[] }[]>`
    select agent_id, scope_queues from endpoints where id = ${endpointId}`;
  return { endpointId, owner: `agent:${row!.agent_id}`, queues: row!.scope_queues };
}

export function expectError(res: Res, status: number, code: string, extra: Record<string, unknown> = {}): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.json).toEqual({ error: expect.any(String), code, ...extra });
  expect(res.json.error).not.toBe('');
}

export const expectInvalid = (res: Res, field: string) => expectError(res, 400, 'invalid_argument', { field });

/** A database and app of the calling file's own; the clock moves a minute before each test. */
export function useOperatorApiSuite(): void {
  beforeAll(async () => {
    db = await migratedDatabase();
    sql = db.sql;
    app = await startTestApp(db.url);
    anon = apiCaller(app.baseUrl);
  });
  afterAll(async () => {
    await app?.stop();
    await db?.drop();
  });
  // The clock is frozen, so token buckets never refill by themselves. Moving it a minute before each
  // test refills every bucket (and gives each test its own timestamps); the rate-limit tests move it
  // themselves, within one test.
  beforeEach(() => {
    app.clock.advance(60_000);
  });
}
