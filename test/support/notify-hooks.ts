// Shared by the notify hook test files (src/services/notify-hooks-*.test.ts).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, expect } from 'vitest';
import { until } from './agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './app.ts';
import { push as pushVia, vend as vendVia, type Vended } from './fixtures.ts';
import type { App } from '../../src/app.ts';
import { ManualClock } from '../../src/lib/clock.ts';

/**
 * Notify hooks end to end (SPEC-0024): real PostgreSQL, real servers, and a plain-HTTP receiver
 * on 127.0.0.1 (allowed by SWITCHBOARD_PUSH_ALLOW_HTTP and SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS)
 * that checks every signature with its own implementation of the Standard Webhooks scheme.
 */

type TestApp = App & { clock: ManualClock };

const HOOK_ENV = { SWITCHBOARD_PUSH_ALLOW_HTTP: '1', SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '127.0.0.1/32' };

export let db: Awaited<ReturnType<typeof migratedDatabase>>;
/** One clock for every instance in this file: time moves for all of them at once. */
export const clock = new ManualClock('2026-09-21T08:00:00Z');
/** The main instance: three attempts, short backoff. */
export let app: TestApp;
/** A second instance on the same database: one attempt per delivery, a short timeout. */
export let appB: TestApp;
/** An instance with neither test flag (https only, no allow list) and at most one hook per endpoint. */
export let strict: TestApp;
export let owner: { id: string; token: string };
export let api: ReturnType<typeof caller>;
export let apiB: ReturnType<typeof caller>;
export let apiStrict: ReturnType<typeof caller>;
const clients: Client[] = [];

// ---------------------------------------------------------------------------------------------
// The receiver

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  body: any;
}

export let receiver: Server;
let receiverBase = '';
export const received: Received[] = [];
const plans = new Map<string, (number | 'hang')[]>();
const hanging: ServerResponse[] = [];
let targetSeq = 0;

interface Target {
  url: string;
  path: string;
  got(): Received[];
}

/** A fresh path on the receiver; it answers the given statuses in order, then 200. */
export function target(...answers: (number | 'hang')[]): Target {
  const path = `/hook/${++targetSeq}`;
  plans.set(path, answers);
  return { url: `${receiverBase}${path}`, path, got: () => received.filter((r) => r.path === path) };
}

/** Answers every request the receiver is holding ('hang') with `status`. */
export function release(status = 200): void {
  for (const res of hanging.splice(0)) {
    res.statusCode = status;
    res.end('{"ok":true}');
  }
}

async function startReceiver(): Promise<void> {
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = undefined;
      }
      const path = req.url ?? '';
      received.push({ path, headers: req.headers, raw, body });
      const answer = plans.get(path)?.shift() ?? 200;
      if (answer === 'hang') return void hanging.push(res);
      if (answer >= 300 && answer < 400) res.setHeader('location', `${receiverBase}/moved`);
      res.statusCode = answer;
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverBase = `http://127.0.0.1:${(receiver.address() as { port: number }).port}`;
}

// ---------------------------------------------------------------------------------------------
// Standard Webhooks, written here independently of src/lib/hook-signing.ts (WebCrypto, not node:crypto's createHmac)

/** The `v1,<base64>` entries of a request's webhook-signature header. */
export function signatureEntries(r: Received): string[] {
  return String(r.headers['webhook-signature'] ?? '')
    .split(' ')
    .filter(Boolean);
}

/** How many of the request's signature entries verify with this `whsec_` secret. */
export async function verifiedBy(r: Received, secret: string): Promise<number> {
  expect(secret).toMatch(/^whsec_/);
  const key = await crypto.subtle.importKey('raw', Buffer.from(secret.slice('whsec_'.length), 'base64'), { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
  const signed = Buffer.concat([Buffer.from(`${String(r.headers['webhook-id'])}.${String(r.headers['webhook-timestamp'])}.`), r.raw]);
  let n = 0;
  for (const entry of signatureEntries(r)) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    const mac = Buffer.from(entry.slice(comma + 1), 'base64');
    // crypto.subtle.verify compares in constant time.
    if (mac.length === 32 && (await crypto.subtle.verify('HMAC', key, mac, signed))) n++;
  }
  return n;
}

/** Every request verifies with exactly one entry made with `secret`. */
export async function expectSigned(rs: Received[], secret: string): Promise<void> {
  for (const r of rs) expect(await verifiedBy(r, secret)).toBe(1);
}

// ---------------------------------------------------------------------------------------------
// Helpers

/** An API caller on one instance; each write first moves the shared clock on 4 s so the write limit never bites. */
export function caller(on: App, token: string) {
  const raw = apiCaller(on.url, token);
  return (method: string, path: string, body?: unknown) => {
    if (method !== 'GET') clock.advance(4000);
    return raw(method, path, body);
  };
}

export const vend = (body: Record<string, unknown> = {}): Promise<Vended> =>
  vendVia(api, { name: 'agent', queues: ['reviews', 'inbox'], ...body });

export async function push(e: Vended, title: string, opts: { queue?: string; payload?: unknown; via?: typeof api } = {}): Promise<string> {
  return (await pushVia(opts.via ?? api, e, { title, queue: opts.queue ?? 'reviews', payload: opts.payload })).id;
}

interface HookOut {
  hook_id: string;
  url: string;
  queues: string[];
  ignore_presence: boolean;
  enabled: boolean;
  signing_secret: string;
}

export async function createHook(e: Vended, body: Record<string, unknown>, via = api): Promise<HookOut> {
  const r = await via('POST', `/api/v1/endpoints/${e.slug}/hooks`, body);
  expect(r.status, r.text).toBe(201);
  return r.json;
}

export async function listHooks(e: Vended): Promise<{ hooks: any[]; ceiling: { max: number; used: number } }> {
  const r = await api('GET', `/api/v1/endpoints/${e.slug}/hooks`);
  expect(r.status).toBe(200);
  return r.json;
}

export async function hookView(e: Vended, hookId: string): Promise<any> {
  return (await listHooks(e)).hooks.find((h) => h.hook_id === hookId);
}

/** The health columns straight from the database, for polling (the API's read limit would bite). */
export async function health(hookId: string) {
  const [row] = await db.sql<{ enabled: boolean; consecutive_failures: number; last_status: number | null; last_error: string | null }[]>`
    select enabled, consecutive_failures, last_status, last_error from notify_hooks where id = ${hookId}`;
  return row!;
}

export { until };
/** A brief wait to show that nothing more arrives. */
export const settle = () => new Promise((r) => setTimeout(r, 250));

// ---------------------------------------------------------------------------------------------

interface Agent {
  client: Client;
  call: (name: string, args?: Record<string, unknown>) => Promise<any>;
}

export async function connect(e: Vended): Promise<Agent> {
  const client = new Client({ name: 'claude-code', version: '2.1.0' });
  const transport = new StreamableHTTPClientTransport(new URL(e.mcp_url), { requestInit: { headers: { Authorization: `Bearer ${e.token}` } } });
  await client.connect(transport);
  clients.push(client);
  return {
    client,
    call: async (name, args = {}) => {
      const r = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
      return r.isError ? { error: r.content[0]!.text } : JSON.parse(r.content[0]!.text);
    },
  };
}

/** The receiver, a database and three instances (main, appB, strict) of the calling file's own. */
export function useNotifyHooksSuite(): void {
  beforeAll(async () => {
    await startReceiver();
    db = await migratedDatabase();
    app = await startTestApp(db.url, clock, { env: HOOK_ENV, selfTestRingDelayMs: 20, notifyHookDelivery: { attempts: 3, backoffMs: [10, 10], timeoutMs: 2000 } });
    appB = await startTestApp(db.url, clock, { env: HOOK_ENV, notifyHookDelivery: { attempts: 1, backoffMs: [10, 10], timeoutMs: 300 } });
    strict = await startTestApp(db.url, clock, { env: { SWITCHBOARD_NOTIFY_HOOK_MAX: '1' } });
    owner = await humanWithToken(db.sql);
    api = caller(app, owner.token);
    apiB = caller(appB, owner.token);
    apiStrict = caller(strict, owner.token);
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => {})));
    for (const res of hanging) res.destroy();
    await Promise.all([app?.stop(), appB?.stop(), strict?.stop()]);
    receiver.closeAllConnections();
    await new Promise((r) => receiver.close(r));
    await db?.drop();
  });
}
