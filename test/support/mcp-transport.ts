// Shared by the MCP Streamable HTTP transport conformance files (src/mcp/transport-*.test.ts).

import http, { type IncomingHttpHeaders } from 'node:http';
import { afterEach, beforeAll, expect } from 'vitest';
import { vend as vendVia, withApp, type Api, type TestApp, type TestDb, type Vended } from './fixtures.ts';
import type { Sql } from '../../src/db/connect.ts';
import { type Session } from '../../src/sessions/registry.ts';
import { until } from './agents.ts';

export { until };

// Conformance of the MCP Streamable HTTP transport at /mcp/{slug}, in raw HTTP (fetch, and node:http
// where an SSE stream must stay open) against the real server and a real database of this file's own.
// Expected values are spelled out here rather than imported, so a drifting constant fails a test.

export let db: TestDb;
export let sql: Sql;
export let app: TestApp;
export let api: Api;
export let operatorId: string;
export const ACCEPT_BOTH = 'application/json, text/event-stream';
// Streams a test forgot (or failed before closing) must not leak into the next test.
export const openStreams: SseStream[] = [];

// ---------------------------------------------------------------------------------------------
// Helpers

export type { Vended };

export const vend = (body: Record<string, unknown> = {}): Promise<Vended> => vendVia(api, { name: 'conformance', ...body });

export async function revokeEndpoint(ep: Vended): Promise<void> {
  const res = await api('POST', `/api/v1/endpoints/${ep.slug}/revoke`);
  expect(res.status, res.text).toBe(200);
}

export interface Res {
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
export async function mcp(ep: Pick<Vended, 'mcp_url' | 'token'>, method: string, opts: McpOpts = {}): Promise<Res> {
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
export const request = (method: string, params?: Record<string, unknown>) => ({ jsonrpc: '2.0', id: ++rpcSeq, method, ...(params ? { params } : {}) });

export const initParams = (over: Record<string, unknown> = {}) => ({
  protocolVersion: '2025-06-18',
  capabilities: {},
  clientInfo: { name: 'conformance', version: '1.0.0' },
  ...over,
});

/** initialize: answers the response and the minted session id. */
export async function initialize(ep: Vended, params: Record<string, unknown> = initParams()): Promise<{ res: Res; sid: string; id: number }> {
  const msg = request('initialize', params);
  const res = await mcp(ep, 'POST', { body: msg });
  expect(res.status, res.text).toBe(200);
  const sid = res.headers.get('mcp-session-id');
  expect(sid).toBeTruthy();
  return { res, sid: sid!, id: msg.id };
}

/** A request on an established session that must answer 200; returns the JSON-RPC response. */
export async function rpc(ep: Vended, sid: string, method: string, params?: Record<string, unknown>): Promise<any> {
  const msg = request(method, params);
  const res = await mcp(ep, 'POST', { body: msg, sid });
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expectNoStoreNoSniff(res);
  expect(res.json.jsonrpc).toBe('2.0');
  expect(res.json.id).toBe(msg.id);
  return res.json;
}

/** A refusal: the HTTP status with a JSON-RPC error body carrying `code`. */
export function expectRpcError(res: Res, status: number, code: number, id: number | string | null = null): void {
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

/** A 401 names the realm and, for an OAuth client given only the URL, the endpoint's resource metadata (RFC 9728 §5.1). */
export function expectUnauthorized(res: Res, slug?: string): void {
  expectRpcError(res, 401, -32000);
  const header = res.headers.get('www-authenticate') ?? '';
  expect(header).toMatch(new RegExp(`^Bearer realm="switchboard", resource_metadata="${app.baseUrl.replace(/[.]/g, '\\.')}/\\.well-known/oauth-protected-resource/mcp/${slug ?? '[a-z0-9-]+'}"$`));
}

export const sessionById = (sid: string): Session | undefined => app.services.sessions.all().find((s) => s.id === sid);

export function mustSession(sid: string): Session {
  const s = sessionById(sid);
  expect(s, `session ${sid} should be registered`).toBeDefined();
  return s!;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


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

export function openSse(url: string, headers: Record<string, string>): Promise<SseStream> {
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
export async function openStream(ep: Vended, sid: string): Promise<SseStream> {
  const s = await openSse(ep.mcp_url, { authorization: `Bearer ${ep.token}`, accept: 'text/event-stream', 'mcp-session-id': sid });
  expect(s.status).toBe(200);
  return s;
}

/** Resolves true if the stream ends within `ms`, false otherwise. */
export async function endsWithin(s: SseStream, ms: number): Promise<boolean> {
  return Promise.race([s.ended.then(() => true), sleep(ms).then(() => false)]);
}

export function toHeaders(raw: IncomingHttpHeaders): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(raw)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
  return h;
}

/** A raw request with node:http: it sends exactly the headers given (fetch adds a default Accept and will not set Host). */
export function rawRequest(url: string, method: string, headers: Record<string, string>, body?: string): Promise<Res> {
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

/** A database, app and operator of the calling file's own; closes streams a test left open. */
export function useTransportSuite(): void {
  // The clock is frozen, so token buckets never refill by themselves: a minute per test refills them.
  const f = withApp({ refillMs: 60_000 });
  beforeAll(() => {
    ({ db, sql, app, api } = f);
    operatorId = f.human.id;
  });
  afterEach(() => {
    for (const s of openStreams.splice(0)) s.abort();
  });
}
