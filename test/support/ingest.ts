// Shared by the webhook ingestion test files (src/ingest-http/*.test.ts).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './app.ts';
import { vend as vendVia, type Vended } from './fixtures.ts';
import type { App } from '../../src/app.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { githubHeaders } from '../../src/domain/ingest/fixtures.testkit.ts';
import { createLogger } from '../../src/lib/log.ts';
import { until, untilRingRecorded } from './agents.ts';

export { until, untilRingRecorded };

/**
 * Webhook ingestion end to end: a real server and PostgreSQL, deliveries signed in the test
 * exactly as GitHub and Gitea document it, the doorbell heard by the MCP SDK's own Client.
 */

export type Notification = { method: string; params: { content: string; meta: Record<string, string> } };

export const KEY = randomBytes(32).toString('hex');
export let db: Awaited<ReturnType<typeof migratedDatabase>>;
export let app: App & { clock: ManualClock };
export let api: ReturnType<typeof apiCaller>;
export let ownerToken = '';
export let logged = '';
const clients: Client[] = [];
/** Every signing secret, ingest token and full signature the test saw: none may ever be logged. */
export const neverLogged = new Set<string>();

/** A debug-level logger whose lines go to `sink`. */
export const capture = (sink: (text: string) => void) => createLogger('debug', new Writable({ write: (c, _e, done) => void (sink(c.toString()), done()) }));

// ---------------------------------------------------------------------------------------------
// Helpers

export type { Vended };

export interface Minted {
  webhook_id: string;
  endpoint_id: string;
  source_type: string;
  trust_mode: string;
  target_queue: string;
  ingest_url: string;
  ingest_url_hint: string;
  signing_secret?: string;
}

export const vend = (queues = ['reviews', 'inbox'], extra: Record<string, unknown> = {}, via = api): Promise<Vended> =>
  vendVia(via, { name: 'forge-bot', queues, ...extra });

export async function createWebhook(slug: string, source: string, queue?: string): Promise<Minted> {
  const r = await api('POST', `/api/v1/endpoints/${slug}/webhooks`, { source_type: source, ...(queue ? { target_queue: queue } : {}) });
  expect(r.status).toBe(201);
  const m = r.json as Minted;
  neverLogged.add(tokenOf(m.ingest_url));
  if (m.signing_secret) neverLogged.add(m.signing_secret);
  return m;
}

export const tokenOf = (url: string) => url.split('/').pop()!;

interface Response {
  status: number;
  json: any;
  text: string;
  headers: Headers;
}

export async function post(url: string, body: string | Buffer, headers: Record<string, string>): Promise<Response> {
  for (const [k, v] of Object.entries(headers)) if (/signature/.test(k)) neverLogged.add(v.replace(/^sha(1|256)=/, ''));
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, json, text, headers: res.headers };
}

/** A GitHub delivery of `event`, signed with `secret` (the body is the JSON of `payload` unless a string). */
export function github(w: { ingest_url: string }, event: string, payload: unknown, secret: string, delivery: string = randomUUID()) {
  const body = typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : JSON.stringify(payload);
  return post(w.ingest_url, body, githubHeaders(event, body, secret, delivery));
}

export async function counts(): Promise<{ todos: number; events: number }> {
  const [row] = await db.sql<{ todos: number; events: number }[]>`
    select (select count(*) from todos)::int as todos, (select count(*) from events)::int as events`;
  return row!;
}

export async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const metric = await app.services.metrics.registry.getSingleMetric(name)!.get();
  return metric.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value ?? 0;
}
export const verifyFailures = (provider: string, reason: string) => counter('switchboard_webhook_verify_failures_total', { provider, reason });

export async function todo(id: string) {
  const [row] = await db.sql<{ id: string; title: string; queue: string; endpoint_id: string; payload: any; state: string; source: string; kind: string; event_id: string }[]>`
    select id, title, queue, endpoint_id, payload, state, source, kind, event_id::text as event_id from todos where id = ${id}`;
  return row!;
}

export const settle = () => new Promise((r) => setTimeout(r, 150));

export async function connect(e: Vended): Promise<Client> {
  const client = new Client({ name: 'claude-code', version: '2.1.0' });
  const transport = new StreamableHTTPClientTransport(new URL(e.mcp_url), {
    requestInit: { headers: { Authorization: `Bearer ${e.token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** An SDK client whose doorbells land in `heard`; resolves once its stream is open. */
export async function listener(e: Vended): Promise<{ client: Client; heard: Notification[] }> {
  const heard: Notification[] = [];
  const client = new Client({ name: 'claude-code', version: '2.1.0' });
  client.fallbackNotificationHandler = async (n) => void heard.push(n as unknown as Notification);
  const transport = new StreamableHTTPClientTransport(new URL(e.mcp_url), {
    requestInit: { headers: { Authorization: `Bearer ${e.token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  const sessionId = transport.sessionId!;
  await until(() => app.services.sessions.all().some((s) => s.id === sessionId && s.stream !== null), 'the stream to open');
  return { client, heard };
}

/** Calls a tool; the parsed JSON result, or `{error: "<code>: <message>"}` for a tool error. */
export async function call(client: Client, name: string, args: Record<string, unknown> = {}): Promise<any> {
  const r = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
  const text = r.content[0]!.text;
  return r.isError ? { error: text } : JSON.parse(text);
}

export const doorbellsFor = (heard: Notification[], todoId: string) => heard.filter((n) => n.params.meta.todo_id === todoId);

/**
 * Runs one refused delivery: asserts the status and code, that no todo or event was stored, that
 * nothing secret reached the log, and returns the response and the log lines it produced.
 */
export async function refused(status: number, code: string, deliver: () => Promise<Response>): Promise<{ r: Response; lines: string }> {
  const before = await counts();
  const mark = logged.length;
  const r = await deliver();
  expect(r.status).toBe(status);
  expect(r.json).toMatchObject({ code });
  expect(await counts()).toEqual(before);
  const lines = logged.slice(mark);
  for (const s of neverLogged) expect(lines).not.toContain(s);
  return { r, lines };
}

/** A database and app of the calling file's own, logging at debug level into `logged`. */
/**
 * The endpoint and webhooks deliveries.test.ts creates in its first tests (GitHub to reviews, Gitea
 * and generic to inbox), for files whose tests use them without testing their creation.
 */
export async function seedForgeWebhooks(): Promise<{ forge: Vended; gh: Minted; gt: Minted; gen: Minted }> {
  const forge = await vend();
  const gh = await createWebhook(forge.slug, 'github', 'reviews');
  const gt = await createWebhook(forge.slug, 'gitea', 'inbox');
  const gen = await createWebhook(forge.slug, 'generic', 'inbox');
  return { forge, gh, gt, gen };
}

export function useIngestSuite(): void {
  beforeAll(async () => {
    db = await migratedDatabase();
    app = await startTestApp(db.url, new ManualClock(), { env: { SWITCHBOARD_SECRET_ENCRYPTION_KEY: KEY }, log: capture((t) => void (logged += t)) });
    ownerToken = (await humanWithToken(db.sql)).token;
    api = apiCaller(app.url, ownerToken);
  });
  // Refills the per-IP ingest bucket (20 at 10/s) and the API buckets between tests; stays well under
  // the doorbell's 60 s creation gate, so a creation's own todo_ready echo is still absorbed.
  beforeEach(() => void app.clock.advance(5_000));
  afterAll(async () => {
    for (const s of neverLogged) expect(logged).not.toContain(s);
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    await app.stop();
    await db.drop();
  });
}
