import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { ManualClock } from '../lib/clock.ts';
import type { Sql } from '../db/connect.ts';
import { revokeOwnEndpoint } from '../store/endpoints.ts';
import { SessionRegistry, type Session } from '../sessions/registry.ts';

// Conformance of the MCP Streamable HTTP transport at /mcp/{slug}, in raw HTTP (fetch, and node:http
// where an SSE stream must stay open) against the real server and a real database of this file's own.
// Expected values are spelled out here rather than imported, so a drifting constant fails a test.

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let sql: Sql;
let app: Awaited<ReturnType<typeof startTestApp>>;
let api: ReturnType<typeof apiCaller>;
let operatorId: string;

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;
const REALM = 'Bearer realm="switchboard"';
const ACCEPT_BOTH = 'application/json, text/event-stream';
const DRAIN_VERBS = ['list_todos', 'get_todo', 'claim', 'claim_next', 'heartbeat', 'complete', 'fail', 'release'];
// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

beforeAll(async () => {
  db = await migratedDatabase();
  sql = db.sql;
  app = await startTestApp(db.url);
  const operator = await humanWithToken(sql);
  operatorId = operator.id;
  api = apiCaller(app.url, operator.token);
});
afterAll(async () => {
  await app?.stop();
  await db?.drop();
});
// The clock is frozen, so token buckets never refill by themselves: a minute per test refills them.
beforeEach(() => {
  app.clock.advance(60_000);
});
// Streams a test forgot (or failed before closing) must not leak into the next test.
const openStreams: SseStream[] = [];
afterEach(() => {
  for (const s of openStreams.splice(0)) s.abort();
});

// ---------------------------------------------------------------------------------------------
// Helpers

interface Vended {
  id: string;
  slug: string;
  token: string;
  mcp_url: string;
  verbs: string[];
  queues: string[];
  last_seen_at: string | null;
}

async function vend(body: Record<string, unknown> = {}): Promise<Vended> {
  const res = await api('POST', '/api/v1/endpoints', { name: 'conformance', ...body });
  expect(res.status, res.text).toBe(201);
  return res.json as Vended;
}

async function pushTodo(ep: Vended, title: string): Promise<string> {
  const res = await api('POST', `/api/v1/endpoints/${ep.slug}/todos`, { title });
  expect(res.status, res.text).toBe(201);
  return res.json.id as string;
}

async function revokeEndpoint(ep: Vended): Promise<void> {
  const res = await api('POST', `/api/v1/endpoints/${ep.slug}/revoke`);
  expect(res.status, res.text).toBe(200);
}

interface Res {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

interface McpOpts {
  /** A JSON value (serialized) or, as a string, the raw body. */
  body?: unknown;
  sid?: string;
  /** The bearer; null sends no Authorization header. Defaults to the endpoint's credential. */
  token?: string | null;
  /** Overrides (or, with undefined, removes) the default headers. */
  headers?: Record<string, string | undefined>;
  url?: string;
}

/** One raw HTTP request to an endpoint's MCP URL. POSTs default to the headers a conforming client sends. */
async function mcp(ep: Pick<Vended, 'mcp_url' | 'token'>, method: string, opts: McpOpts = {}): Promise<Res> {
  const token = opts.token === undefined ? ep.token : opts.token;
  const merged: Record<string, string | undefined> = {
    ...(token ? { authorization: `Bearer ${token}` } : {}),
    ...(method === 'POST' ? { 'content-type': 'application/json', accept: ACCEPT_BOTH } : {}),
    ...(method === 'GET' ? { accept: 'text/event-stream' } : {}),
    ...(opts.sid ? { 'mcp-session-id': opts.sid } : {}),
    ...opts.headers,
  };
  const headers = Object.fromEntries(Object.entries(merged).filter((e): e is [string, string] => e[1] !== undefined));
  const res = await fetch(opts.url ?? ep.mcp_url, {
    method,
    headers,
    body: opts.body === undefined ? undefined : typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body),
  });
  const text = await res.text();
  let json: any = undefined;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, json };
}

let rpcSeq = 0;
const request = (method: string, params?: Record<string, unknown>) => ({ jsonrpc: '2.0', id: ++rpcSeq, method, ...(params ? { params } : {}) });

const initParams = (over: Record<string, unknown> = {}) => ({
  protocolVersion: '2025-06-18',
  capabilities: {},
  clientInfo: { name: 'conformance', version: '1.0.0' },
  ...over,
});

/** initialize: answers the response and the minted session id. */
async function initialize(ep: Vended, params: Record<string, unknown> = initParams()): Promise<{ res: Res; sid: string; id: number }> {
  const msg = request('initialize', params);
  const res = await mcp(ep, 'POST', { body: msg });
  expect(res.status, res.text).toBe(200);
  const sid = res.headers.get('mcp-session-id');
  expect(sid).toBeTruthy();
  return { res, sid: sid!, id: msg.id };
}

/** A request on an established session that must answer 200; returns the JSON-RPC response. */
async function rpc(ep: Vended, sid: string, method: string, params?: Record<string, unknown>): Promise<any> {
  const msg = request(method, params);
  const res = await mcp(ep, 'POST', { body: msg, sid });
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expectNoStoreNoSniff(res);
  expect(res.json.jsonrpc).toBe('2.0');
  expect(res.json.id).toBe(msg.id);
  return res.json;
}

async function callTool(ep: Vended, sid: string, name: string, args?: Record<string, unknown>): Promise<any> {
  const out = await rpc(ep, sid, 'tools/call', { name, ...(args === undefined ? {} : { arguments: args }) });
  expect(out.error, JSON.stringify(out)).toBeUndefined();
  return out.result;
}

/** A refusal: the HTTP status with a JSON-RPC error body carrying `code`. */
function expectRpcError(res: Res, status: number, code: number, id: number | string | null = null): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.json).toEqual({ jsonrpc: '2.0', id, error: { code, message: expect.any(String) } });
  expect(res.json.error.message).not.toBe('');
  expectNoStoreNoSniff(res);
}

/** Every MCP answer is uncacheable and not to be sniffed. */
function expectNoStoreNoSniff(res: Pick<Res, 'headers'>): void {
  expect(res.headers.get('cache-control')).toBe('no-store');
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
}

function expectUnauthorized(res: Res): void {
  expectRpcError(res, 401, -32000);
  expect(res.headers.get('www-authenticate')).toBe(REALM);
}

const sessionById = (sid: string): Session | undefined => app.sessions.all().find((s) => s.id === sid);

function mustSession(sid: string): Session {
  const s = sessionById(sid);
  expect(s, `session ${sid} should be registered`).toBeDefined();
  return s!;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls until `cond` holds; fails the test after `ms`. */
async function until(cond: () => boolean, label: string, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for: ${label}`);
    await sleep(10);
  }
}

/** An SSE response held open with node:http, collecting everything it receives. */
interface SseStream {
  status: number;
  headers: IncomingHttpHeaders;
  received(): string;
  /** Resolves with everything received once `pred` holds for it; rejects after `ms`. */
  waitFor(pred: (text: string) => boolean, label: string, ms?: number): Promise<string>;
  /** Resolves when the response finishes (server ended it) or the connection closes. */
  ended: Promise<void>;
  isEnded(): boolean;
  abort(): void;
}

function openSse(url: string, headers: Record<string, string>): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    // agent: false, so each stream has its own socket and aborting one closes exactly that connection.
    const req = http.request(url, { method: 'GET', headers, agent: false });
    req.on('error', reject);
    req.on('response', (res) => {
      let buf = '';
      let done = false;
      let markEnded!: () => void;
      const ended = new Promise<void>((r) => (markEnded = r));
      const finish = () => {
        done = true;
        markEnded();
      };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (buf += chunk));
      res.on('end', finish);
      res.on('close', finish);
      res.on('error', finish);
      req.removeListener('error', reject);
      req.on('error', () => finish());
      const stream: SseStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        received: () => buf,
        async waitFor(pred, label, ms = 3000) {
          await until(() => pred(buf), label, ms);
          return buf;
        },
        ended,
        isEnded: () => done,
        abort: () => req.destroy(),
      };
      openStreams.push(stream);
      resolve(stream);
    });
    req.end();
  });
}

/** Opens the session's GET stream on the test app, expecting 200. */
async function openStream(ep: Vended, sid: string): Promise<SseStream> {
  const s = await openSse(ep.mcp_url, { authorization: `Bearer ${ep.token}`, accept: 'text/event-stream', 'mcp-session-id': sid });
  expect(s.status).toBe(200);
  return s;
}

/** Resolves true if the stream ends within `ms`, false otherwise. */
async function endsWithin(s: SseStream, ms: number): Promise<boolean> {
  return Promise.race([s.ended.then(() => true), sleep(ms).then(() => false)]);
}

function toHeaders(raw: IncomingHttpHeaders): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(raw)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
  return h;
}

/** A raw request with node:http: it sends exactly the headers given (fetch adds a default Accept and will not set Host). */
function rawRequest(url: string, method: string, headers: Record<string, string>, body?: string): Promise<Res> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let json: any;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: toHeaders(res.headers), text, json });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const frame = (msg: unknown) => `event: message\ndata: ${JSON.stringify(msg)}\n\n`;

// ---------------------------------------------------------------------------------------------

/** The self verbs tools/list advertises after the granted ones. */
const SELF_VERBS_LISTED = ['clock_in', 'clock_out', 'presence', 'ack_doorbell', 'test_doorbell', 'get_doorbell_test'];

describe('authentication', () => {
  it('refuses every bad credential with 401, the realm and a JSON-RPC error, and creates no session', async () => {
    const ep = await vend();
    const other = await vend();
    const human = await humanWithToken(sql);
    const revoked = await vend();
    // The revoked credential worked before the revocation, so its 401 is the revocation's doing.
    await initialize(revoked);
    await revokeEndpoint(revoked);
    // Likewise the other endpoint's credential is good on its own URL.
    await initialize(other);
    const before = app.sessions.size;

    const attempts: [string, string | null][] = [
      ['no bearer', null],
      ['an unknown sbk_ credential', `sbk_${randomBytes(32).toString('base64url')}`],
      ["a human's sbp_ token", human.token],
      ["a revoked endpoint's credential", revoked.token],
      ["another endpoint's valid credential", other.token],
    ];
    const bodies = new Set<string>();
    for (const [label, token] of attempts) {
      const res = await mcp(ep, 'POST', { body: request('initialize', initParams()), token });
      expect(res.status, label).toBe(401);
      expectUnauthorized(res);
      expect(res.headers.get('mcp-session-id'), label).toBeNull();
      bodies.add(res.text);
    }
    // The revoked endpoint's own URL refuses it too.
    expectUnauthorized(await mcp(revoked, 'POST', { body: request('initialize', initParams()) }));
    // Other methods are guarded the same way.
    expectUnauthorized(await mcp(ep, 'GET', { token: null }));
    expectUnauthorized(await mcp(ep, 'DELETE', { token: other.token, sid: 'x' }));
    // One answer whatever the reason.
    expect(bodies.size).toBe(1);
    expect(app.sessions.size).toBe(before);
    expect(app.sessions.sessionsOf(ep.id)).toEqual([]);
  });

  it('stamps last_seen_at on a successful request, not on a refused one', async () => {
    const ep = await vend();
    expect(ep.last_seen_at).toBeNull();
    const seen = async () => (await sql<{ last_seen_at: Date | null }[]>`select last_seen_at from endpoints where id = ${ep.id}`)[0]!.last_seen_at;

    expectUnauthorized(await mcp(ep, 'POST', { body: request('initialize', initParams()), token: null }));
    expect(await seen()).toBeNull();

    await initialize(ep);
    expect((await seen())?.toISOString()).toBe(app.clock.now().toISOString());
  });
});

describe('POST initialize', () => {
  it('mints an unguessable session id and answers the negotiated version, capabilities, serverInfo and instructions', async () => {
    const ep = await vend();
    const { res, sid, id } = await initialize(ep);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(sid).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(Buffer.from(sid, 'base64url').length).toBeGreaterThanOrEqual(16);
    expect(res.json.jsonrpc).toBe('2.0');
    expect(res.json.id).toBe(id);
    expect(res.json.error).toBeUndefined();
    const result = res.json.result;
    expect(result.protocolVersion).toBe('2025-06-18');
    expect(result.capabilities).toEqual({ tools: { listChanged: true }, experimental: { 'claude/channel': {} } });
    expect(result.serverInfo).toEqual({ name: 'switchboard', version: PACKAGE_VERSION });
    expect(typeof result.instructions).toBe('string');
    for (const word of ['todo_id', 'digest', 'claim_next', 'heartbeat', 'complete', 'fail']) {
      expect(result.instructions, word).toContain(word);
    }
    const session = mustSession(sid);
    expect(session.endpoint.id).toBe(ep.id);
    expect(session.protocolVersion).toBe('2025-06-18');

    // Every initialize mints a fresh id.
    const ids = new Set([sid]);
    for (let i = 0; i < 4; i++) ids.add((await initialize(ep)).sid);
    expect(ids.size).toBe(5);
  });

  it('echoes each supported version and answers 2025-11-25 to an unknown or newer one', async () => {
    const ep = await vend();
    for (const v of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
      const { res, sid } = await initialize(ep, initParams({ protocolVersion: v }));
      expect(res.json.result.protocolVersion, v).toBe(v);
      expect(mustSession(sid).protocolVersion).toBe(v);
    }
    for (const v of ['2026-07-28', '1999-01-01', 42, undefined]) {
      const { res } = await initialize(ep, initParams({ protocolVersion: v }));
      expect(res.json.result.protocolVersion, String(v)).toBe('2025-11-25');
    }
  });

  it('stores clientInfo neutralized: no control characters, at most 128 characters', async () => {
    const ep = await vend();
    const name = `evil\n\u001b[31mclient\r\u0007\u2028${'x'.repeat(300)}`;
    const { sid } = await initialize(ep, initParams({ clientInfo: { name, version: '1.0\n\u0000injected' } }));
    const stored = mustSession(sid).clientInfo;
    expect(stored.name).not.toMatch(CONTROL_CHARS);
    expect([...stored.name].length).toBeLessThanOrEqual(128);
    expect([...stored.name].length).toBe(128); // the input was longer: capped, not dropped
    expect(stored.name.startsWith('evil [31mclient x')).toBe(true);
    expect(stored.version).not.toMatch(CONTROL_CHARS);
    expect(stored.version).toBe('1.0 injected');

    // Missing clientInfo still makes a session, with a placeholder name.
    const bare = await initialize(ep, { protocolVersion: '2025-06-18', capabilities: {} });
    expect(mustSession(bare.sid).clientInfo.name).toBe('unknown');
  });

  it('refuses initialize that carries an Mcp-Session-Id with 400 -32600, minting nothing', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const before = app.sessions.sessionsOf(ep.id).length;
    const msg = request('initialize', initParams());
    const res = await mcp(ep, 'POST', { body: msg, sid });
    expectRpcError(res, 400, -32600, msg.id);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(app.sessions.sessionsOf(ep.id).length).toBe(before);
    // An unknown id in the header is refused the same way.
    const res2 = await mcp(ep, 'POST', { body: msg, sid: 'not-a-session' });
    expectRpcError(res2, 400, -32600, msg.id);
    expect(app.sessions.sessionsOf(ep.id).length).toBe(before);
  });
});

describe('POST checks', () => {
  it('checks media types: 415 for a non-JSON Content-Type, 406 for an Accept missing either type', async () => {
    const ep = await vend();
    const before = app.sessions.size;
    const body = JSON.stringify(request('initialize', initParams()));
    expectRpcError(await mcp(ep, 'POST', { body, headers: { 'content-type': 'text/plain' } }), 415, -32000);
    expectRpcError(await mcp(ep, 'POST', { body, headers: { 'content-type': 'application/x-www-form-urlencoded' } }), 415, -32000);
    expectRpcError(await mcp(ep, 'POST', { body, headers: { accept: 'application/json' } }), 406, -32000);
    expectRpcError(await mcp(ep, 'POST', { body, headers: { accept: 'text/event-stream' } }), 406, -32000);
    // No Content-Type at all.
    const noType = await rawRequest(ep.mcp_url, 'POST', { authorization: `Bearer ${ep.token}`, accept: ACCEPT_BOTH }, body);
    expectRpcError(noType, 415, -32000);
    // No Accept at all (fetch would send its default).
    const noAccept = await rawRequest(ep.mcp_url, 'POST', { authorization: `Bearer ${ep.token}`, 'content-type': 'application/json' }, body);
    expectRpcError(noAccept, 406, -32000);
    expect(app.sessions.size).toBe(before);
    // Parameters on the media types are fine.
    const ok = await mcp(ep, 'POST', {
      body,
      headers: { 'content-type': 'application/json; charset=utf-8', accept: 'application/json;q=0.9, text/event-stream;q=0.8' },
    });
    expect(ok.status, ok.text).toBe(200);
    expect(ok.headers.get('mcp-session-id')).toBeTruthy();
  });

  it('refuses a body over 1 MiB with 413, and accepts one just under', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const padded = (bytes: number) => {
      const shell = JSON.stringify({ ...request('ping', { pad: '' }) });
      return shell.replace('"pad":""', `"pad":"${'x'.repeat(bytes - Buffer.byteLength(shell))}"`);
    };
    const over = padded(1024 * 1024 + 1);
    expect(Buffer.byteLength(over)).toBe(1024 * 1024 + 1);
    expectRpcError(await mcp(ep, 'POST', { body: over, sid }), 413, -32000);
    // A chunked body (no Content-Length) is held to the same limit.
    const chunked = await new Promise<Res>((resolve, reject) => {
      const req = http.request(ep.mcp_url, {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${ep.token}`, 'content-type': 'application/json', accept: ACCEPT_BOTH, 'mcp-session-id': sid },
      });
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: toHeaders(res.headers), text, json: JSON.parse(text) }));
      });
      req.on('error', reject);
      expect(req.getHeader('content-length')).toBeUndefined();
      for (let i = 0; i < 17; i++) req.write(over.slice(i * 65536, (i + 1) * 65536));
      req.end();
    });
    expectRpcError(chunked, 413, -32000);
    const under = padded(1024 * 1024 - 1024);
    const res = await mcp(ep, 'POST', { body: under, sid });
    expect(res.status, res.text.slice(0, 200)).toBe(200);
    expect(res.json.result).toEqual({});
  });

  it('answers malformed JSON -32700, a batch -32600 and a message without jsonrpc "2.0" -32600, all 400', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    expectRpcError(await mcp(ep, 'POST', { body: '{"jsonrpc":"2.0","id":1,', sid }), 400, -32700);
    expectRpcError(await mcp(ep, 'POST', { body: '', sid }), 400, -32700);
    expectRpcError(await mcp(ep, 'POST', { body: [request('ping'), request('ping')], sid }), 400, -32600);
    expectRpcError(await mcp(ep, 'POST', { body: { id: 7, method: 'ping' }, sid }), 400, -32600, 7);
    expectRpcError(await mcp(ep, 'POST', { body: { jsonrpc: '1.0', id: 'a', method: 'ping' }, sid }), 400, -32600, 'a');
    expectRpcError(await mcp(ep, 'POST', { body: 'null', sid }), 400, -32600);
    // A batch cannot sneak an initialize past the check either.
    const before = app.sessions.size;
    expectRpcError(await mcp(ep, 'POST', { body: [request('initialize', initParams())] }), 400, -32600);
    expect(app.sessions.size).toBe(before);
  });

  it('answers notifications and client responses 202 with an empty body', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    expect(mustSession(sid).initialized).toBe(false);
    const note = await mcp(ep, 'POST', { body: { jsonrpc: '2.0', method: 'notifications/initialized' }, sid });
    expect(note.status).toBe(202);
    expect(note.text).toBe('');
    expect(mustSession(sid).initialized).toBe(true);

    const cancelled = await mcp(ep, 'POST', { body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }, sid });
    expect(cancelled.status).toBe(202);
    expect(cancelled.text).toBe('');

    const response = await mcp(ep, 'POST', { body: { jsonrpc: '2.0', id: 5, result: {} }, sid });
    expect(response.status).toBe(202);
    expect(response.text).toBe('');
    const errResponse = await mcp(ep, 'POST', { body: { jsonrpc: '2.0', id: 6, error: { code: -1, message: 'no' } }, sid });
    expect(errResponse.status).toBe(202);
    expect(errResponse.text).toBe('');
  });

  it('answers ping with an empty result and an unknown method with -32601, correlated by id', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const ping = await rpc(ep, sid, 'ping');
    expect(ping.result).toEqual({});
    expect(ping.error).toBeUndefined();

    const unknown = await rpc(ep, sid, 'server/discover');
    expect(unknown.result).toBeUndefined();
    expect(unknown.error).toEqual({ code: -32601, message: expect.stringContaining('server/discover') });

    // A string id is echoed as given.
    const res = await mcp(ep, 'POST', { body: { jsonrpc: '2.0', id: 'req-1', method: 'ping' }, sid });
    expect(res.json).toEqual({ jsonrpc: '2.0', id: 'req-1', result: {} });
  });

  it('requires a session on every other request: missing 400, unknown 404 -32001, another endpoint\'s 404', async () => {
    const ep = await vend();
    const other = await vend();
    const { sid } = await initialize(ep);
    const { sid: otherSid } = await initialize(other);

    expectRpcError(await mcp(ep, 'POST', { body: request('ping') }), 400, -32000);
    expectRpcError(await mcp(ep, 'POST', { body: { jsonrpc: '2.0', method: 'notifications/initialized' } }), 400, -32000);
    const unknown = await mcp(ep, 'POST', { body: request('ping'), sid: randomBytes(16).toString('base64url') });
    expectRpcError(unknown, 404, -32001);

    // The other endpoint's session, presented with the other endpoint's credential on its own URL, is
    // fine; presented with this endpoint's credential on this URL it does not exist.
    expect((await rpc(other, otherSid, 'ping')).result).toEqual({});
    const foreign = await mcp(ep, 'POST', { body: request('ping'), sid: otherSid });
    expectRpcError(foreign, 404, -32001);
    expect(foreign.text).toBe(unknown.text);
    // ...and the session is untouched by the attempt.
    expect(mustSession(otherSid).endpoint.id).toBe(other.id);
    // The mirror image: the first endpoint's session under the other's credential.
    expectRpcError(await mcp(other, 'POST', { body: request('ping'), sid }), 404, -32001);
    expect((await rpc(ep, sid, 'ping')).result).toEqual({});
  });

  it('checks MCP-Protocol-Version against the supported list: unsupported 400, any supported one OK', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep); // negotiated 2025-06-18
    for (const bad of ['2026-07-28', 'banana', '']) {
      expectRpcError(await mcp(ep, 'POST', { body: request('ping'), sid, headers: { 'mcp-protocol-version': bad } }), 400, -32000);
    }
    for (const good of ['2025-06-18', '2025-11-25', '2024-11-05']) {
      const res = await mcp(ep, 'POST', { body: request('ping'), sid, headers: { 'mcp-protocol-version': good } });
      expect(res.status, good).toBe(200);
      expect(res.json.result).toEqual({});
    }
    // The GET stream checks it too.
    expectRpcError(await mcp(ep, 'GET', { sid, headers: { 'mcp-protocol-version': '2026-07-28' } }), 400, -32000);
  });
});

describe('tools', () => {
  it('lists exactly the granted verbs', async () => {
    const narrow = await vend({ verbs: ['list_todos', 'claim'] });
    const { sid } = await initialize(narrow);
    const listed = (await rpc(narrow, sid, 'tools/list')).result.tools as { name: string; description: string; inputSchema: any }[];
    // The granted verbs, then the self verbs every endpoint has.
    expect(listed.map((t) => t.name)).toEqual(['list_todos', 'claim', ...SELF_VERBS_LISTED]);
    for (const t of listed) {
      expect(t.description).not.toBe('');
      expect(t.inputSchema.type).toBe('object');
    }

    const full = await vend();
    const { sid: fullSid } = await initialize(full);
    const all = (await rpc(full, fullSid, 'tools/list')).result.tools as { name: string }[];
    expect(all.map((t) => t.name)).toEqual([...DRAIN_VERBS, ...SELF_VERBS_LISTED]);
  });

  it('refuses a known but ungranted verb with a forbidden tool error, and does nothing', async () => {
    const ep = await vend({ verbs: ['list_todos', 'claim'] });
    const todo = await pushTodo(ep, 'guarded');
    const { sid } = await initialize(ep);
    const result = await callTool(ep, sid, 'complete', { id: todo });
    expect(result.isError).toBe(true);
    expect(result.content[0].type).toBe('text');
    expect(result.content[0].text).toMatch(/^forbidden:/);
    const forbiddenNext = await callTool(ep, sid, 'claim_next', {});
    expect(forbiddenNext.isError).toBe(true);
    expect(forbiddenNext.content[0].text).toMatch(/^forbidden:/);
    // The todo is still pending: neither refused call touched it.
    const listed = await callTool(ep, sid, 'list_todos', {});
    expect(listed.isError).toBeUndefined();
    expect(listed.structuredContent.todos).toEqual([expect.objectContaining({ id: todo, state: 'pending' })]);
    // A granted verb works.
    const claimed = await callTool(ep, sid, 'claim', { id: todo });
    expect(claimed.isError).toBeUndefined();
    expect(claimed.structuredContent).toMatchObject({ id: todo, state: 'claimed', title: 'guarded' });
  });

  it('answers an unknown tool with -32602, and bad arguments with invalid_argument tool errors', async () => {
    const ep = await vend();
    const todo = await pushTodo(ep, 'args');
    const { sid } = await initialize(ep);

    const unknown = await rpc(ep, sid, 'tools/call', { name: 'create_todo', arguments: {} });
    expect(unknown.result).toBeUndefined();
    expect(unknown.error).toEqual({ code: -32602, message: expect.stringContaining('create_todo') });
    const nameless = await rpc(ep, sid, 'tools/call', { arguments: {} });
    expect(nameless.error.code).toBe(-32602);

    const extra = await callTool(ep, sid, 'list_todos', { endpoint: 'someone-else' });
    expect(extra.isError).toBe(true);
    expect(extra.content[0].text).toMatch(/^invalid_argument:/);
    expect(extra.content[0].text).toContain('endpoint');
    expect(extra.structuredContent.error).toMatchObject({ code: 'invalid_argument', field: 'endpoint' });

    for (const id of ['nope', 'td_123', todo.toUpperCase(), 42]) {
      const bad = await callTool(ep, sid, 'claim', { id });
      expect(bad.isError, String(id)).toBe(true);
      expect(bad.content[0].text, String(id)).toMatch(/^invalid_argument:/);
      expect(bad.structuredContent.error.field).toBe('id');
    }
    // None of that claimed anything; a well-formed call does.
    const next = await callTool(ep, sid, 'claim_next', {});
    expect(next.structuredContent).toMatchObject({ empty: false, todo: { id: todo, state: 'claimed' } });
  });
});

describe('GET stream', () => {
  it('validates Accept and the session: 406, 400, 404, and another endpoint\'s session 404', async () => {
    const ep = await vend();
    const other = await vend();
    const { sid } = await initialize(ep);
    const { sid: otherSid } = await initialize(other);
    expectRpcError(await mcp(ep, 'GET', { sid, headers: { accept: 'application/json' } }), 406, -32000);
    expectRpcError(await rawRequest(ep.mcp_url, 'GET', { authorization: `Bearer ${ep.token}`, 'mcp-session-id': sid }), 406, -32000);
    expectRpcError(await mcp(ep, 'GET', {}), 400, -32000);
    expectRpcError(await mcp(ep, 'GET', { sid: 'unknown-session' }), 404, -32001);
    expectRpcError(await mcp(ep, 'GET', { sid: otherSid }), 404, -32001);
    expect(mustSession(sid).stream).toBeNull();
    expect(mustSession(otherSid).stream).toBeNull();
    expect(app.sessions.hasOpenStream(ep.id)).toBe(false);
  });

  it('opens an SSE stream that carries written messages; no_stream before it opens and after the client aborts', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const session = mustSession(sid);
    expect(app.sessions.write(session, { jsonrpc: '2.0', method: 'early' })).toBe('no_stream');

    const stream = await openStream(ep, sid);
    expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
    expect(stream.headers['cache-control']).toMatch(/^no-cache/);
    expect(stream.headers['x-content-type-options']).toBe('nosniff');
    expect(stream.headers['x-accel-buffering']).toBe('no');
    expect(stream.headers['mcp-session-id']).toBe(sid);
    expect(app.sessions.hasOpenStream(ep.id)).toBe(true);

    const msg = { jsonrpc: '2.0', method: 'notifications/claude/channel', params: { content: 'ding', meta: { todo_id: 'td_x' } } };
    expect(app.sessions.write(session, msg)).toBe('written');
    await stream.waitFor((t) => t.includes(frame(msg)), 'the message frame');
    const second = { jsonrpc: '2.0', method: 'notifications/claude/channel', params: { content: 'dong' } };
    expect(app.sessions.write(session, second)).toBe('written');
    const text = await stream.waitFor((t) => t.includes(frame(second)), 'the second frame');
    expect(text.indexOf(frame(msg))).toBeLessThan(text.indexOf(frame(second)));
    // Nothing was written before the stream opened.
    expect(text).not.toContain('early');

    stream.abort();
    await until(() => session.stream === null, 'the server to observe the close');
    expect(app.sessions.write(session, msg)).toBe('no_stream');
    expect(app.sessions.hasOpenStream(ep.id)).toBe(false);
    // The session itself survives a dropped stream: the client may reconnect.
    expect(sessionById(sid)).toBe(session);
    const again = await openStream(ep, sid);
    expect(app.sessions.write(session, second)).toBe('written');
    await again.waitFor((t) => t.includes(frame(second)), 'the frame on the reopened stream');
  });

  it('a GET whose client went away before the stream was attached leaves no open stream behind', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const session = mustSession(sid);
    // Past the credential cache and the last_seen_at throttle, so the GET's authentication updates the
    // endpoint row; a row lock held here then parks the request between arrival and handler.
    app.clock.advance(5 * 60_000);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holder = sql.begin(async (tx) => {
      await tx`select id from endpoints where id = ${ep.id} for update`;
      locked();
      await gate;
    });
    try {
      await isLocked;
      const req = http.request(ep.mcp_url, {
        method: 'GET',
        agent: false,
        headers: { authorization: `Bearer ${ep.token}`, accept: 'text/event-stream', 'mcp-session-id': sid },
      });
      req.on('error', () => undefined);
      req.end();
      const waiting = async () =>
        (await sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)[0]!.n;
      const deadline = Date.now() + 3000;
      while ((await waiting()) === 0) {
        if (Date.now() > deadline) throw new Error('the GET never reached the database');
        await sleep(10);
      }
      req.destroy(); // the client gives up while the server is still authenticating
      await sleep(100);
    } finally {
      release();
      await holder;
    }
    // The handler now runs for a response whose connection is gone: it must not count as a stream.
    // Wait for the authentication's stamp to land, then for the handler to have run.
    const stampedAt = app.clock.now().toISOString();
    const seen = async () => (await sql<{ t: Date | null }[]>`select last_seen_at as t from endpoints where id = ${ep.id}`)[0]!.t?.toISOString();
    const stampDeadline = Date.now() + 3000;
    while ((await seen()) !== stampedAt) {
      if (Date.now() > stampDeadline) throw new Error('the parked GET never finished authenticating');
      await sleep(10);
    }
    await sleep(150);
    expect(session.stream).toBeNull();
    expect(app.sessions.hasOpenStream(ep.id)).toBe(false);
    expect(app.sessions.write(session, { jsonrpc: '2.0', method: 'x' })).toBe('no_stream');
    // A real reconnect afterwards works as usual.
    const live = await openStream(ep, sid);
    const msg = { jsonrpc: '2.0', method: 'notifications/message', params: { after: 'race' } };
    expect(app.sessions.write(session, msg)).toBe('written');
    await live.waitFor((t) => t.includes(frame(msg)), 'the frame on the reconnected stream');
    live.abort();
    await until(() => session.stream === null, 'the reconnected stream to close');
    // ...and with no stream the idle janitor can still retire the session.
    app.clock.advance(31 * 60_000);
    app.sessions.expireIdle();
    expect(sessionById(sid)).toBeUndefined();
  });

  it('newest GET wins: a second GET on the session ends the first, and writes go to the second', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const session = mustSession(sid);
    const first = await openStream(ep, sid);
    const second = await openStream(ep, sid);
    expect(await endsWithin(first, 3000)).toBe(true);
    expect(second.isEnded()).toBe(false);

    const msg = { jsonrpc: '2.0', method: 'notifications/message', params: { n: 1 } };
    expect(app.sessions.write(session, msg)).toBe('written');
    await second.waitFor((t) => t.includes(frame(msg)), 'the frame on the newest stream');
    expect(first.received()).not.toContain(JSON.stringify(msg));
    expect(app.sessions.hasOpenStream(ep.id)).toBe(true);
  });

  it('fires endpointStreamAttached on the endpoint\'s 0→1 open stream only', async () => {
    const ep = await vend();
    const { sid: a } = await initialize(ep);
    const { sid: b } = await initialize(ep);
    const fired: string[] = [];
    const opened: string[] = [];
    const onAttached = (endpointId: string, s: Session) => {
      if (endpointId === ep.id) fired.push(s.id);
    };
    const onOpened = (s: Session) => {
      if (s.endpoint.id === ep.id) opened.push(s.id);
    };
    app.sessions.on('endpointStreamAttached', onAttached);
    app.sessions.on('streamOpened', onOpened);
    try {
      const sa = await openStream(ep, a);
      expect(fired).toEqual([a]);
      const sb = await openStream(ep, b); // a second concurrent session's stream: 1 → 2
      expect(fired).toEqual([a]);
      expect(opened).toEqual([a, b]);

      sa.abort(); // 2 → 1: b still holds the endpoint open
      await until(() => mustSession(a).stream === null, 'a closed');
      await openStream(ep, a); // 1 → 2
      expect(fired).toEqual([a]);

      for (const s of openStreams) s.abort();
      await until(() => !app.sessions.hasOpenStream(ep.id), 'every stream of the endpoint closed');
      expect(sb.isEnded() || mustSession(b).stream === null).toBe(true);
      await openStream(ep, b); // 0 → 1 again
      expect(fired).toEqual([a, b]);
    } finally {
      app.sessions.off('endpointStreamAttached', onAttached);
      app.sessions.off('streamOpened', onOpened);
    }
  });

  it('sends a keepalive comment at the registry\'s interval', async () => {
    const registry = new SessionRegistry(new ManualClock(), { keepaliveMs: 50 });
    const session = registry.create({ id: 'ep-keepalive', slug: 'keepalive', agentId: 'agent', queues: ['q'], verbs: [], webhookMax: 1 }, '2025-11-25', {
      name: 'test',
      version: '1',
    });
    const server = http.createServer((_req, res) => registry.attachStream(session, res));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { port } = server.address() as AddressInfo;
      const stream = await openSse(`http://127.0.0.1:${port}/`, { accept: 'text/event-stream' });
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
      // Two of them: it repeats, not just once.
      const text = await stream.waitFor((t) => t.split(': keepalive\n\n').length > 2, 'two keepalive comments', 2000);
      expect(text.startsWith(': keepalive\n\n')).toBe(true);
      expect(text.replaceAll(': keepalive\n\n', '')).toBe('');
      // Closing the session ends the stream and stops the timer.
      registry.close(session, 'test over');
      expect(await endsWithin(stream, 2000)).toBe(true);
      expect(session.stream).toBeNull();
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('DELETE and other methods', () => {
  it('DELETE ends the session (204) and its stream; later requests with the id get 404', async () => {
    const ep = await vend();
    const other = await vend();
    const { sid } = await initialize(ep);
    const stream = await openStream(ep, sid);

    // Another endpoint cannot delete it.
    expectRpcError(await mcp(other, 'DELETE', { sid }), 404, -32001);
    expect(sessionById(sid)).toBeDefined();

    const res = await mcp(ep, 'DELETE', { sid });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(sessionById(sid)).toBeUndefined();
    expect(await endsWithin(stream, 3000)).toBe(true);
    expect(app.sessions.hasOpenStream(ep.id)).toBe(false);

    expectRpcError(await mcp(ep, 'POST', { body: request('ping'), sid }), 404, -32001);
    expectRpcError(await mcp(ep, 'GET', { sid }), 404, -32001);
    expectRpcError(await mcp(ep, 'DELETE', { sid }), 404, -32001);
    expectRpcError(await mcp(ep, 'DELETE', {}), 400, -32000);
  });

  it('answers PUT and PATCH with 405 and Allow', async () => {
    const ep = await vend();
    for (const method of ['PUT', 'PATCH']) {
      const res = await mcp(ep, method, { body: request('ping'), headers: { 'content-type': 'application/json' } });
      expectRpcError(res, 405, -32000);
      const allow = (res.headers.get('allow') ?? '').split(',').map((m) => m.trim()).sort();
      expect(allow, method).toEqual(['DELETE', 'GET', 'POST']);
    }
  });
});

describe('idle expiry', () => {
  it('expires a session after 30 idle minutes, but not one with an open stream or one touched 29 minutes ago', async () => {
    const ep = await vend();
    const { sid: idle } = await initialize(ep);
    const { sid: streaming } = await initialize(ep);
    const { sid: recent } = await initialize(ep);
    await openStream(ep, streaming);

    app.clock.advance(60_000);
    expect((await rpc(ep, recent, 'ping')).result).toEqual({}); // touched at t+1 min
    app.clock.advance(29 * 60_000); // idle: 30 min; recent: 29 min; streaming: open

    app.sessions.expireIdle();
    expect(sessionById(idle)).toBeUndefined();
    expect(sessionById(streaming)).toBeDefined();
    expect(sessionById(recent)).toBeDefined();
    expectRpcError(await mcp(ep, 'POST', { body: request('ping'), sid: idle }), 404, -32001);

    // That 404 is no request on any live session; a minute later the recent one has idled out too.
    app.clock.advance(60_000);
    app.sessions.expireIdle();
    expect(sessionById(recent)).toBeUndefined();
    expect(sessionById(streaming)).toBeDefined();
    expect((await rpc(ep, streaming, 'ping')).result).toEqual({});
  });
});

describe('revocation', () => {
  it('ends open streams and sessions promptly, and the credential is refused afterwards', async () => {
    const ep = await vend();
    const bystander = await vend();
    const { sid } = await initialize(ep);
    const { sid: quiet } = await initialize(ep);
    const { sid: otherSid } = await initialize(bystander);
    const stream = await openStream(ep, sid);
    const otherStream = await openStream(bystander, otherSid);

    await revokeEndpoint(ep);
    expect(await endsWithin(stream, 3000)).toBe(true);
    await until(() => app.sessions.sessionsOf(ep.id).length === 0, 'the sessions to be closed');
    expect(sessionById(quiet)).toBeUndefined();
    expect(app.sessions.hasOpenStream(ep.id)).toBe(false);

    expectUnauthorized(await mcp(ep, 'POST', { body: request('ping'), sid }));
    expectUnauthorized(await mcp(ep, 'POST', { body: request('initialize', initParams()) }));
    expectUnauthorized(await mcp(ep, 'GET', { sid }));

    // Another endpoint is not affected.
    expect(otherStream.isEnded()).toBe(false);
    expect((await rpc(bystander, otherSid, 'ping')).result).toEqual({});
  });

  it('reacts to a revocation committed elsewhere (another instance) through LISTEN endpoint_revoked alone', async () => {
    const ep = await vend();
    const { sid } = await initialize(ep);
    const stream = await openStream(ep, sid);
    expect((await rpc(ep, sid, 'ping')).result).toEqual({});

    // Straight through the store, as another instance would: this app's API never sees it.
    await revokeOwnEndpoint(sql, operatorId, ep.slug, app.clock.now());
    expect(await endsWithin(stream, 3000)).toBe(true);
    await until(() => app.sessions.sessionsOf(ep.id).length === 0, 'the sessions to be closed');
    // No cached credential outlives the revocation.
    expectUnauthorized(await mcp(ep, 'POST', { body: request('ping'), sid }));
    expectUnauthorized(await mcp(ep, 'POST', { body: request('initialize', initParams()) }));
  });
});

describe('rate limit', () => {
  it('allows 40 requests per endpoint with the clock frozen, then 429 with Retry-After; another endpoint is unaffected', async () => {
    const ep = await vend();
    const other = await vend();
    const { sid } = await initialize(ep); // 1
    for (let i = 2; i <= 40; i++) {
      const res = await mcp(ep, 'POST', { body: request('ping'), sid });
      expect(res.status, `request ${i}`).toBe(200);
    }
    const limited = await mcp(ep, 'POST', { body: request('ping'), sid });
    expectRpcError(limited, 429, -32000);
    const retryAfter = limited.headers.get('retry-after');
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    // Stream (re)establishment draws on the same bucket.
    expectRpcError(await mcp(ep, 'GET', { sid }), 429, -32000);
    expect(mustSession(sid).stream).toBeNull();

    const { sid: otherSid } = await initialize(other);
    expect((await rpc(other, otherSid, 'ping')).result).toEqual({});

    // After Retry-After seconds the endpoint may go on.
    app.clock.advance(Number(retryAfter) * 1000);
    expect((await rpc(ep, sid, 'ping')).result).toEqual({});
  });
});

describe('host guard', () => {
  it('refuses a foreign Host on the loopback-bound server with 403, and accepts loopback names', async () => {
    const ep = await vend();
    const port = new URL(app.url).port;
    const body = JSON.stringify(request('initialize', initParams()));
    const headers = {
      authorization: `Bearer ${ep.token}`,
      'content-type': 'application/json',
      accept: ACCEPT_BOTH,
    };
    const before = app.sessions.size;
    for (const host of ['evil.example', `evil.example:${port}`, `127.0.0.1.evil.example:${port}`]) {
      const res = await rawRequest(ep.mcp_url, 'POST', { ...headers, host }, body);
      expect(res.status, host).toBe(403);
      expectRpcError(res, 403, -32000);
      expect(res.headers.get('mcp-session-id')).toBeNull();
    }
    expect(app.sessions.size).toBe(before);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) {
      const res = await rawRequest(ep.mcp_url, 'POST', { ...headers, host }, body);
      expect(res.status, host).toBe(200);
      expect(res.headers.get('mcp-session-id')).toBeTruthy();
    }
  });
});

describe('shutdown', () => {
  it('app.stop() ends open streams and closes every session', async () => {
    const second = await startTestApp(db.url);
    let stopped = false;
    try {
      const ep = await vend();
      const onSecond: Vended = { ...ep, mcp_url: `${second.url}/mcp/${ep.slug}` };
      const { sid } = await initialize(onSecond);
      expect(second.sessions.size).toBe(1);
      const stream = await openStream(onSecond, sid);
      expect(second.sessions.hasOpenStream(ep.id)).toBe(true);

      const stopping = second.stop().then(() => (stopped = true));
      expect(await endsWithin(stream, 3000)).toBe(true);
      await Promise.race([stopping, sleep(5000)]);
      expect(stopped).toBe(true);
      expect(second.sessions.size).toBe(0);
      // The main app was never involved.
      expect(app.sessions.sessionsOf(ep.id)).toEqual([]);
    } finally {
      if (!stopped) await second.stop();
    }
  });
});
