import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { shiftText } from '../../src/domain/presence/arbitraries.testkit.ts';
import { DRAIN_VERBS, WEBHOOK_VERBS } from '../../src/domain/scope.ts';
import { connectAgent, until } from '../support/agents.ts';
import {
  anyJson,
  anyString,
  api,
  app,
  clients,
  contentType,
  fuzz,
  headerValue,
  mostly,
  request,
  useHostileInputSuite,
} from '../support/hostile-input.ts';

// Fault: hostile input at the MCP door (JSON-RPC bodies, every tool with random arguments) and in shift strings.

useHostileInputSuite();

describe('hostile input', () => {
  it('MCP JSON-RPC bodies: random bytes, random JSON, random methods and params, every tool with random arguments', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'fuzzed', queues: ['reviews', 'inbox'], verbs: [...DRAIN_VERBS, ...WEBHOOK_VERBS] });
    expect(r.status).toBe(201);
    const e = r.json as { id: string; slug: string; token: string };
    // The tool schemas the arguments are drawn from, as the SDK client sees them. Its session
    // ends before the fuzz: with no stream open no doorbell is written, so nothing changes the
    // database behind a request's back (a ring record lands after the answer).
    const sdk = await connectAgent(app, e);
    const tools = (await sdk.client.listTools()).tools;
    const toolNames = tools.map((t) => t.name);
    expect(toolNames).toContain('claim_next');
    await sdk.client.close();
    await until(() => app.services.sessions.sessionsOf(e.id).every((s) => s.stream === null), 'the SDK stream to close');
    // Real todos to aim at.
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push((await api('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: `target ${i}`, queue: i % 2 ? 'inbox' : 'reviews' })).json.id);
    const ringIds = ['rg_01JZZZZZZZZZZZZZZZZZZZZZZZ', 'rg_x'];

    const url = `${app.url}/mcp/${e.slug}`;
    const base = { authorization: `Bearer ${e.token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
    const init = await fetch(url, {
      method: 'POST',
      headers: base,
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'fuzzer', version: '1' } } }),
    });
    const sessionId = init.headers.get('mcp-session-id')!;
    expect(sessionId).toBeTruthy();

    /** A plausible value for an argument, by its name; anything at all now and then. */
    const valueFor = (key: string): fc.Arbitrary<unknown> => {
      const plausible: Record<string, fc.Arbitrary<unknown>> = {
        id: fc.oneof(fc.constantFrom(...ids), fc.uuid().map((u) => `td_${u}`)),
        queue: fc.constantFrom('reviews', 'inbox', 'elsewhere', '_switchboard'),
        target_queue: fc.constantFrom('reviews', 'inbox', 'elsewhere'),
        state: fc.constantFrom('pending', 'claimed', 'done', 'failed', 'lost'),
        limit: fc.integer({ min: -5, max: 500 }),
        lease_ttl_seconds: fc.oneof(fc.integer({ min: -10, max: 200_000 }), fc.constantFrom(0, 1, 86_400, 86_401, 2 ** 31, 2 ** 53)),
        require_fence: fc.boolean(),
        lease_token: fc.string({ maxLength: 200 }),
        result: anyJson,
        include_synthetic: fc.boolean(),
        for: fc.constantFrom('30m', '2h', '1h30m', '0m', '25h', '-5m', '90s', '7d'),
        ring_id: fc.constantFrom(...ringIds),
        test_id: fc.constantFrom('dt_01JZZZZZZZZZZZZZZZZZZZZZZZ', 'dt_', 'dt_\u0000'),
        wait_seconds: fc.integer({ min: -5, max: 400 }),
        source_type: fc.constantFrom('github', 'gitea', 'generic', 'gitlab'),
        webhook_id: fc.uuid(),
      };
      return mostly(plausible[key] ?? anyJson);
    };
    const toolCall = fc.oneof(
      // A known tool, its own argument names with plausible or hostile values, now and then a stranger.
      {
        weight: 8,
        arbitrary: fc.constantFrom(...tools).chain((t) => {
          const keys = Object.keys((t.inputSchema.properties ?? {}) as object);
          const known = keys.length ? fc.subarray(keys).chain((ks) => fc.record(Object.fromEntries(ks.map((k) => [k, valueFor(k)])))) : fc.constant({});
          return fc.record({
            name: fc.constant(t.name),
            arguments: fc.oneof(
              { weight: 6, arbitrary: known },
              { weight: 1, arbitrary: fc.tuple(known, fc.dictionary(anyString, anyJson, { minKeys: 1, maxKeys: 2 })).map(([a, b]) => ({ ...b, ...a })) },
              { weight: 1, arbitrary: anyJson },
            ),
          });
        }),
      },
      { weight: 1, arbitrary: fc.record({ name: fc.oneof(anyString, anyJson), arguments: fc.dictionary(anyString, anyJson, { maxKeys: 3 }) }, { requiredKeys: [] }) },
    );
    const method = fc.oneof(
      fc.constantFrom('initialize', 'ping', 'tools/list', 'tools/call', 'notifications/initialized', 'notifications/cancelled', 'resources/list', 'prompts/list', 'logging/setLevel', 'completion/complete'),
      anyString,
    );
    const rpc = fc.record(
      {
        jsonrpc: mostly(fc.constant('2.0'), 6),
        id: fc.oneof(fc.nat(), anyString, fc.constant(null), fc.double(), anyJson),
        method,
        params: fc.oneof(anyJson, toolCall, fc.record({ protocolVersion: mostly(fc.constantFrom('2025-11-25', '2024-11-05')), clientInfo: anyJson, capabilities: anyJson })),
        result: anyJson,
        error: anyJson,
      },
      { requiredKeys: [] },
    );
    const body = fc.oneof(
      { weight: 1, arbitrary: anyString },
      { weight: 1, arbitrary: anyJson.map((v) => JSON.stringify(v)) },
      { weight: 3, arbitrary: rpc.map((v) => JSON.stringify(v)) },
      { weight: 8, arbitrary: fc.record({ jsonrpc: fc.constant('2.0'), id: fc.nat(), method: fc.constant('tools/call'), params: toolCall }).map((v) => JSON.stringify(v)) },
    );
    const headers = fc.record({
      session: fc.oneof({ weight: 12, arbitrary: fc.constant(sessionId) }, { weight: 1, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: headerValue }),
      version: fc.oneof({ weight: 6, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom('2025-11-25', '2024-11-05') }, { weight: 1, arbitrary: headerValue }),
      contentType: fc.oneof({ weight: 12, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: contentType }),
      accept: fc.oneof({ weight: 12, arbitrary: fc.constant(base.accept) }, { weight: 1, arbitrary: headerValue }),
    });

    await fuzz('POST /mcp/{slug}', fc.tuple(body, headers), 700, async ([b, h]) => {
      const res = await request(url, {
        method: 'POST',
        headers: {
          authorization: base.authorization,
          accept: h.accept,
          'content-type': h.contentType,
          ...(h.session !== undefined ? { 'mcp-session-id': h.session } : {}),
          ...(h.version !== undefined ? { 'mcp-protocol-version': h.version } : {}),
        },
        body: b,
      });
      const toolError = res.json?.result?.isError === true;
      return {
        status: res.status,
        refused: res.status >= 400 || res.json?.error !== undefined || toolError,
        answer: toolError ? String(res.json.result.content?.[0]?.text) : res.answer,
      };
    });

    // The verbs that need a held claim (complete, fail, heartbeat, release) rarely meet one by
    // chance: each case here first claims a todo, then calls one of them with random arguments.
    const callTool = async (name: string, args: unknown) =>
      request(url, { method: 'POST', headers: { ...base, 'mcp-session-id': sessionId }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } }) });
    /** Arguments for a verb on a held claim: its own, plausible or hostile, and now and then a token or a stranger. */
    const heldArgs = (verb: string) => {
      const own = fc.record(
        {
          ...(verb === 'complete' || verb === 'fail' ? { result: anyJson } : {}),
          ...(verb === 'heartbeat' ? { lease_ttl_seconds: valueFor('lease_ttl_seconds') } : {}),
        },
        { requiredKeys: [] },
      );
      const extra = fc.record({ lease_token: fc.oneof(fc.string({ maxLength: 40 }), anyJson), surprise: anyJson }, { requiredKeys: [] });
      return fc.oneof({ weight: 3, arbitrary: own }, { weight: 1, arbitrary: fc.tuple(own, extra).map(([o, x]) => ({ ...x, ...o })) });
    };
    const heldCase = fc.constantFrom('complete', 'fail', 'heartbeat', 'release').chain((verb) => fc.tuple(fc.constant(verb), heldArgs(verb), fc.boolean()));
    await fuzz('POST /mcp/{slug} on a held claim', heldCase, 200, async ([verb, a, fenced], prepared) => {
      let claimed = await callTool('claim_next', { require_fence: fenced });
      if (claimed.json?.result?.structuredContent?.empty) {
        await api('POST', `/api/v1/endpoints/${e.slug}/todos`, { title: 'more work', queue: 'reviews' });
        claimed = await callTool('claim_next', { require_fence: fenced });
      }
      const held = claimed.json.result.structuredContent as { todo: { id: string }; lease_token?: string };
      await prepared();
      const res = await callTool(verb, { id: held.todo.id, ...a, ...(fenced && !('lease_token' in a) ? { lease_token: held.lease_token } : {}) });
      const toolError = res.json?.result?.isError === true;
      return { status: res.status, refused: res.status >= 400 || toolError, answer: toolError ? String(res.json.result.content?.[0]?.text) : res.answer };
    });

    // Still serving MCP afterwards. Its stream is closed before the next door is fuzzed: left
    // open, the clock those cases move would let the sweep re-ring this endpoint's pending todos,
    // writing a ring behind a refused shift's back.
    const after = await connectAgent(app, e);
    clients.push(after.client);
    expect(await after.call('list_todos', {})).toHaveProperty('todos');
    await after.client.close();
    await until(() => app.services.sessions.sessionsOf(e.id).every((s) => s.stream === null), 'the last SDK stream to close');
  });

  it('shift strings: refused ones change nothing, accepted ones come back canonical and stable', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'shifty', queues: ['reviews'] });
    expect(r.status).toBe(201);
    const slug = r.json.slug as string;
    /** A valid shift with a few characters inserted, deleted or replaced. */
    const mutated = fc
      .tuple(
        shiftText(),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom('insert', 'delete', 'swap'), fc.oneof(fc.constantFrom(...'0123456789:-;, \tMonTueSunTZ=/+_'), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }))), { maxLength: 3 }),
      )
      .map(([text, edits]) => {
        let s = text;
        for (const [at, op, ch] of edits) {
          const i = s.length ? at % s.length : 0;
          s = op === 'insert' ? s.slice(0, i) + ch + s.slice(i) : op === 'delete' ? s.slice(0, i) + s.slice(i + 1) : s.slice(0, i) + ch + s.slice(i + 1);
        }
        return s;
      });
    const shiftBody = fc.oneof(
      { weight: 3, arbitrary: mutated.map((shift) => ({ shift })) },
      { weight: 2, arbitrary: shiftText().map((shift) => ({ shift })) },
      { weight: 2, arbitrary: anyString.map((shift) => ({ shift })) },
      { weight: 1, arbitrary: fc.stringMatching(/^(TZ=[A-Za-z_/+-]{0,20} )?([A-Za-z,-]{0,12} )?\d{1,3}:\d{1,3}-\d{1,3}:\d{1,3}$/).map((shift) => ({ shift })) },
      { weight: 1, arbitrary: anyJson.map((shift) => ({ shift })) },
      { weight: 1, arbitrary: fc.dictionary(anyString, anyJson, { maxKeys: 3 }) },
    );
    await fuzz('PUT /api/v1/endpoints/{ref}/shift', shiftBody, 400, async (b) => {
      const res = await api('PUT', `/api/v1/endpoints/${slug}/shift`, b);
      if (res.status === 200 && res.json.shift !== null) {
        // The canonical form parses back to itself.
        const again = await api('PUT', `/api/v1/endpoints/${slug}/shift`, { shift: res.json.shift });
        expect(again.status).toBe(200);
        expect(again.json.shift).toBe(res.json.shift);
      }
      return { status: res.status, refused: res.status >= 400, answer: res.text.slice(0, 300) };
    });
  });

});