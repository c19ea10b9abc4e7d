// Shared by the doorbell acknowledgement test files (src/services/doorbell/acks-*.test.ts).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { Writable } from 'node:stream';
import type { Counter } from 'prom-client';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './app.ts';
import { push as pushVia, vend as vendVia } from './fixtures.ts';
import type { App } from '../../src/app.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { createLogger } from '../../src/lib/log.ts';
import { connectAgent, until, type Agent, type Notification, type Vended } from './agents.ts';

/**
 * Doorbell acknowledgement end to end (SPEC-0025 REQ-1 to REQ-6, REQ-11, REQ-12): ring records,
 * acknowledgement by claim and by ack_doorbell, the unheard sweep across instances, the per-session
 * unheard mark and the /metrics scrape. Real PostgreSQL, SDK clients over HTTP, time moved by hand.
 */

export type TestApp = App & { clock: ManualClock };

export interface RingRow {
  ring_id: string;
  endpoint_id: string;
  session_id: string;
  todo_id: string | null;
  kind: string;
  queue: string | null;
  synthetic: boolean;
  window_seconds: number;
  sent_at: Date;
  acked_at: Date | null;
  ack_via: string | null;
  acked_session_id: string | null;
  unheard_at: Date | null;
}

export const WINDOW_MS = 15 * 60_000;

/** A logger whose JSON lines land in `lines`. */
export function capturingLogger() {
  const lines: Record<string, any>[] = [];
  const log = createLogger(
    'info',
    new Writable({
      write: (chunk, _enc, done) => {
        for (const l of chunk.toString().split('\n')) if (l.trim()) lines.push(JSON.parse(l));
        done();
      },
    }),
  );
  return { log, lines };
}

/**
 * Counts creation and wakeup rings per todo on an app. A push rings once from its own request and,
 * while another instance is registered (only then is todo_ready broadcast), once more from its
 * echo (gated); tests wait for both before moving the clock, or a late echo would find its gate
 * expired and ring again.
 */
const readyCalls = new WeakMap<App, Map<string, number>>();
export function instrument<T extends App>(a: T): T {
  const calls = new Map<string, number>();
  readyCalls.set(a, calls);
  const original = a.services.readyRings.ringReady.bind(a.services.readyRings);
  a.services.readyRings.ringReady = (todo) => {
    calls.set(todo.id, (calls.get(todo.id) ?? 0) + 1);
    return original(todo);
  };
  return a;
}
const echoed = async (a: App, todoId: string) => {
  const [{ n }] = (await db.sql`select count(*)::int as n from instances`) as unknown as [{ n: number }];
  await until(() => (readyCalls.get(a)?.get(todoId) ?? 0) >= (n > 1 ? 2 : 1), 'the todo_ready echo');
};

export let db: Awaited<ReturnType<typeof migratedDatabase>>;
export let app: TestApp;
export let logs: Record<string, any>[];
export let human: { token: string };
export let api: ReturnType<typeof apiCaller>;
const clients: Client[] = [];
/** An agent with its stream open and its reconnect digest decided (see connectAgent). */
export const agent = (e: Vended, on: TestApp = app, name = 'claude-code'): Promise<Agent> => connectAgent(on, e, { name, track: clients });
export const extraApps: TestApp[] = [];

export const vend = (queues = ['reviews'], via = api): Promise<Vended> => vendVia(via, { name: 'agent', queues });

export const push = async (e: Vended, title: string, via = api, queue?: string): Promise<string> => (await pushVia(via, e, { title, queue })).id;
export const ringsOfEndpoint = (endpointId: string) => db.sql<RingRow[]>`select * from doorbell_rings where endpoint_id = ${endpointId} order by sent_at, ring_id`;
export const ringById = async (ringId: string) => (await db.sql<RingRow[]>`select * from doorbell_rings where ring_id = ${ringId}`)[0];

/** The value of one series of `on`'s registry (labels must match exactly). */
export async function metric(on: App, name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = on.services.metrics.registry.getSingleMetric(name) as Counter | undefined;
  if (!m) throw new Error(`no metric ${name}`);
  const { values } = await m.get();
  const want = Object.entries(labels);
  const v = values.find((x) => Object.keys(x.labels).length === want.length && want.every(([k, val]) => x.labels[k] === val));
  return v?.value ?? 0;
}

/** One doorbell rung to `a` (on `on`) for a fresh todo: the notification, and its ring record once stored. */
export async function ringOne(e: Vended, a: Agent, title: string, via = api, on: App = app): Promise<{ todoId: string; note: Notification; ring: RingRow }> {
  const before = a.heard.length;
  const todoId = await push(e, title, via);
  await until(() => a.heard.length > before, `the doorbell for "${title}"`);
  const note = a.heard[a.heard.length - 1]!;
  expect(note.params.meta.todo_id).toBe(todoId);
  let ring: RingRow | undefined;
  await until(async () => (ring = await ringById(note.params.meta.ring_id!)) !== undefined, 'the ring record');
  await echoed(on, todoId);
  return { todoId, note, ring: ring! };
}

/** A database and an instrumented app of the calling file's own (extra apps in `extraApps` are stopped too); every test starts with the rate limiters refilled and no ring left open. */
export function useAcksSuite(): void {
  beforeAll(async () => {
    db = await migratedDatabase();
    const captured = capturingLogger();
    logs = captured.lines;
    app = instrument(await startTestApp(db.url, new ManualClock('2026-09-22T08:00:00Z'), { log: captured.log }));
    human = await humanWithToken(db.sql);
    api = apiCaller(app.url, human.token);
  });
  beforeEach(async () => {
    // Refill the clock-driven rate limiters, and close every ring earlier tests left open so that an
    // unscoped sweep here counts only this test's rings.
    app.clock.advance(60_000);
    await db.sql`update doorbell_rings set acked_at = sent_at, ack_via = 'ack' where acked_at is null and unheard_at is null`;
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await Promise.all(extraApps.map((a) => a.stop()));
    await app.stop();
    await db.drop();
  });
}
