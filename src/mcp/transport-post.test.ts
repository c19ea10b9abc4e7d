import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import {
  ACCEPT_BOTH,
  api,
  app,
  expectRpcError,
  initialize,
  initParams,
  mcp,
  mustSession,
  rawRequest,
  request,
  type Res,
  rpc,
  toHeaders,
  useTransportSuite,
  vend,
  type Vended,
} from '../../test/support/mcp-transport.ts';
import { push } from '../../test/support/fixtures.ts';

// MCP transport conformance: POST /mcp/{slug} (initialize, request checks, tool calls).

useTransportSuite();

const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
  .version;
const DRAIN_VERBS = ['list_todos', 'get_todo', 'claim', 'claim_next', 'heartbeat', 'complete', 'fail', 'release'];
// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

const pushTodo = async (ep: Vended, title: string): Promise<string> => (await push(api, ep, { title })).id;

async function callTool(ep: Vended, sid: string, name: string, args?: Record<string, unknown>): Promise<any> {
  const out = await rpc(ep, sid, 'tools/call', { name, ...(args === undefined ? {} : { arguments: args }) });
  expect(out.error, JSON.stringify(out)).toBeUndefined();
  return out.result;
}

// ---------------------------------------------------------------------------------------------

/** The self verbs tools/list advertises after the granted ones. */
const SELF_VERBS_LISTED = ['clock_in', 'clock_out', 'presence', 'ack_doorbell', 'test_doorbell', 'get_doorbell_test', 'whoami'];

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
    const before = app.services.sessions.sessionsOf(ep.id).length;
    const msg = request('initialize', initParams());
    const res = await mcp(ep, 'POST', { body: msg, sid });
    expectRpcError(res, 400, -32600, msg.id);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(app.services.sessions.sessionsOf(ep.id).length).toBe(before);
    // An unknown id in the header is refused the same way.
    const res2 = await mcp(ep, 'POST', { body: msg, sid: 'not-a-session' });
    expectRpcError(res2, 400, -32600, msg.id);
    expect(app.services.sessions.sessionsOf(ep.id).length).toBe(before);
  });
});

describe('POST checks', () => {
  it('checks media types: 415 for a non-JSON Content-Type, 406 for an Accept missing either type', async () => {
    const ep = await vend();
    const before = app.services.sessions.size;
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
    expect(app.services.sessions.size).toBe(before);
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
    const before = app.services.sessions.size;
    expectRpcError(await mcp(ep, 'POST', { body: [request('initialize', initParams())] }), 400, -32600);
    expect(app.services.sessions.size).toBe(before);
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