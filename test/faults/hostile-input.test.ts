import { createHmac } from 'node:crypto';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/app.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { createLogger } from '../../src/lib/log.ts';
import { shiftText } from '../../src/domain/presence/arbitraries.testkit.ts';
import { DRAIN_VERBS, WEBHOOK_VERBS } from '../../src/domain/scope.ts';
import { connectAgent, until } from '../support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../support/app.ts';
import { createLoginLink } from '../../src/store/web-sessions.ts';

/**
 * Fault: hostile input. fast-check throws random and half-valid input at every door a stranger or
 * a confused client can knock on: MCP JSON-RPC bodies (random bytes, random JSON, random methods
 * and params, every tool with random arguments), shift strings, webhook bodies and headers
 * (signed, wrongly signed, unsigned), the vend and push bodies of the API, and random path
 * segments where a slug, a ref, a token or a board id goes. For every case: no 5xx and no
 * `internal` tool error, nothing logged at error level, and a refusal changes nothing in the database (row counts
 * and the content of todos, endpoints and webhooks are compared before and after each refused
 * request). The server must still work at the end.
 */

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: App & { clock: ManualClock };
let api: ReturnType<typeof apiCaller>;
let humanToken = '';
let human: { handle: string; token: string };
const errorLogs: string[] = [];
const tally = new Map<string, Map<string, number>>();
const clients: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  db = await migratedDatabase();
  const log = createLogger(
    'info',
    new Writable({
      write: (c, _e, done) => {
        for (const line of c.toString().split('\n')) if (line && (JSON.parse(line) as { level: number }).level >= 50) errorLogs.push(line);
        done();
      },
    }),
  );
  app = await startTestApp(db.url, new ManualClock(), { log });
  human = await humanWithToken(db.sql);
  humanToken = human.token;
  api = apiCaller(app.url, humanToken);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await app.stop();
  await db.drop();
  const lines = [...tally].map(([door, statuses]) => `${door}: ${[...statuses].sort().map(([s, n]) => `${n}× ${s}`).join(', ')}`);
  const total = [...tally.values()].reduce((n, m) => n + [...m.values()].reduce((a, b) => a + b, 0), 0);
  console.info(`[faults] hostile input: ${total} cases\n  ${lines.join('\n  ')}`);
});

/**
 * Everything a refusal must leave alone: row counts, and the full content of todos, webhooks and
 * endpoints (except last_seen_at, which authentication stamps at most once a minute whatever the
 * request then turns out to be).
 */
async function fingerprint(): Promise<string> {
  const [row] = await db.sql<{ f: string }[]>`
    select concat_ws('|',
      (select count(*) from todos), (select count(*) from events), (select count(*) from endpoints),
      (select count(*) from webhooks), (select count(*) from doorbell_rings), (select count(*) from doorbell_tests),
      (select count(*) from agents), (select count(*) from humans),
      (select md5(coalesce(string_agg(t::text, ',' order by t.id), '')) from todos t),
      (select md5(coalesce(string_agg((to_jsonb(e) - 'last_seen_at')::text, ',' order by e.id), '')) from endpoints e),
      (select md5(coalesce(string_agg(w::text, ',' order by w.id), '')) from webhooks w)) as f`;
  return row!.f;
}

interface Outcome {
  status: number;
  /** Refused (an error status, a JSON-RPC error or a tool error): nothing may have changed. */
  refused: boolean;
  /** What the server answered, for the failure message. */
  answer: string;
}

/**
 * Runs a property over one door: each case moves the clock (refilling every rate-limit bucket),
 * sends, and checks the outcome against the database and the error log.
 */
async function fuzz<T>(
  door: string,
  arb: fc.Arbitrary<T>,
  numRuns: number,
  /** `prepared()` after setting a case up: the refusal check then starts from there. */
  send: (input: T, prepared: () => Promise<void>) => Promise<Outcome>,
): Promise<void> {
  const statuses = tally.get(door) ?? new Map<string, number>();
  tally.set(door, statuses);
  let before = await fingerprint();
  await fc.assert(
    fc.asyncProperty(arb, async (input) => {
      app.clock.advance(10_000);
      const errorsBefore = errorLogs.length;
      const out = await send(input, async () => void (before = await fingerprint()));
      const key = `${out.status}${out.refused && out.status < 400 ? ' (refused)' : ''}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      expect(out.status, out.answer).toBeLessThan(500);
      expect(out.answer).not.toMatch(/^internal: |"code":-32603/);
      expect(errorLogs.slice(errorsBefore)).toEqual([]);
      const after = await fingerprint();
      if (out.refused) expect(after, `a refusal changed the database: ${out.answer}`).toBe(before);
      before = after;
    }),
    // A fresh seed each run; FUZZ_SEED replays the one a failure printed.
    { numRuns, ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED) } : {}) },
  );
}

/** A board session of the test's human: its cookie and CSRF token. */
async function boardSignIn(): Promise<{ cookie: string; csrf: string }> {
  const { token } = await createLoginLink(db.sql, human.handle, app.clock.now());
  const signIn = await fetch(`${app.url}/login/${token}`, { method: 'POST', redirect: 'manual' });
  const cookie = /^sb_session=[^;]*/.exec(signIn.headers.get('set-cookie') ?? '')![0];
  const home = await (await fetch(`${app.url}/`, { headers: { cookie } })).text();
  return { cookie, csrf: /name="csrf_token" value="([0-9a-f]{64})"/.exec(home)![1]! };
}

async function request(url: string, init: RequestInit): Promise<Outcome & { text: string; json: any }> {
  const res = await fetch(url, init);
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, refused: res.status >= 400, answer: text.slice(0, 300), text, json };
}

// ------------------------------------------------------------------------------------------------
// Generators

/** Characters that have broken servers before: NUL, unpaired surrogates, separators, controls, quoting. */
const nastyChar = fc.constantFrom('\u0000', '\ud800', '\udfff', '\u2028', '\u202e', '\ufeff', '\u0085', '\u001b', '\u007f', '"', '\\', '\n', '\r', '<', '%', '\u{1f600}');
const hostileUnit = fc.oneof(
  { weight: 4, arbitrary: fc.string({ minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: nastyChar },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
);
/** Strings of every kind: printable ASCII, any UTF-16 (NUL, controls, lone surrogates), graphemes. */
const anyString = fc.oneof(fc.string(), fc.string({ unit: hostileUnit }), fc.string({ unit: 'grapheme' }), fc.string({ unit: 'binary-ascii' }));
const anyJson = fc.oneof(fc.jsonValue(), fc.jsonValue({ stringUnit: hostileUnit }), fc.jsonValue({ stringUnit: 'grapheme', maxDepth: 6 }));
/** `valid` most of the time, anything otherwise. */
const mostly = <T>(valid: fc.Arbitrary<T>, weight = 4) => fc.oneof({ weight, arbitrary: valid }, { weight: 1, arbitrary: fc.oneof(anyString, anyJson) as fc.Arbitrary<unknown> });
/** A header value fetch accepts (no CR/LF/NUL, no other controls). */
const headerValue = fc.oneof(fc.string({ unit: 'binary-ascii' }), fc.string()).map((s) => s.replace(/[^\t\x20-\x7e]/g, '').trim());
const headerName = fc.oneof(
  fc.stringMatching(/^x-[a-z0-9-]{1,24}$/),
  fc.constantFrom('x-github-event', 'x-github-delivery', 'x-gitea-event', 'x-gitea-delivery', 'x-hub-signature-256', 'x-hub-signature', 'x-gitea-signature', 'x-delivery-id', 'webhook-id', 'user-agent', 'authorization', 'cookie', 'x-forwarded-for'),
);
const contentType = fc.oneof(
  fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/vnd.github+json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/octet-stream', ''),
  headerValue,
);
/** Any string as a URL path segment: every byte of its UTF-8 percent-encoded, or raw oddities. */
const pathSegment = fc.oneof(
  { weight: 4, arbitrary: anyString.filter((s) => s.length > 0).map((s) => [...Buffer.from(s, 'utf8')].map((b) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`)).join('')) },
  { weight: 1, arbitrary: fc.constantFrom('%00', '%ZZ', '%', '%C0%80', '%ED%A0%80', '..', '%2e%2e', 'x%2Fy', '00000000-0000-0000-0000-000000000000', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'a'.repeat(5000)) },
);

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
    await until(() => app.sessions.sessionsOf(e.id).every((s) => s.stream === null), 'the SDK stream to close');
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

    // Still serving MCP afterwards.
    const after = await connectAgent(app, e);
    clients.push(after.client);
    expect(await after.call('list_todos', {})).toHaveProperty('todos');
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

  it('webhook bodies and headers: signed, wrongly signed and unsigned, to every kind of webhook', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'forge', queues: ['reviews', 'inbox'] });
    expect(r.status).toBe(201);
    const slug = r.json.slug as string;
    const hooks: { url: string; source: string; secret?: string }[] = [];
    for (const source of ['github', 'gitea', 'generic']) {
      const w = await api('POST', `/api/v1/endpoints/${slug}/webhooks`, { source_type: source, target_queue: 'reviews' });
      expect(w.status).toBe(201);
      hooks.push({ url: w.json.ingest_url, source, secret: w.json.signing_secret });
    }

    const payload = fc.oneof(
      { weight: 2, arbitrary: anyJson.map((v) => JSON.stringify(v)) },
      {
        weight: 3,
        arbitrary: fc
          .record(
            {
              action: anyString,
              number: fc.oneof(fc.nat(), anyJson),
              issue: fc.record({ title: anyString, number: fc.nat(), body: anyString }, { requiredKeys: [] }),
              pull_request: fc.record({ title: anyString, body: anyString }, { requiredKeys: [] }),
              repository: fc.record({ full_name: anyString }),
              ref: anyString,
              commits: fc.array(fc.record({ message: anyString }), { maxLength: 3 }),
            },
            { requiredKeys: [] },
          )
          .map((v) => JSON.stringify(v)),
      },
      { weight: 1, arbitrary: anyString },
      { weight: 1, arbitrary: fc.constantFrom('', '{', '[]', 'null', '"\\u0000"', '{"a":"\\ud800"}', '{"\\udfff":1}', `${'['.repeat(200)}${']'.repeat(200)}`, '{"title":"\u0000"}') },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((u) => Buffer.from(u).toString('latin1')) },
    );
    const signature = fc.constantFrom('correct', 'correct', 'correct', 'wrong', 'garbage', 'none', 'unprefixed');
    const extra = fc.dictionary(headerName, headerValue, { maxKeys: 5 });
    const event = fc.oneof(fc.constantFrom('issues', 'pull_request', 'push', 'ping', 'issue_comment', 'release'), headerValue);
    const delivery = fc.oneof(fc.uuid(), headerValue, fc.constant(undefined));

    await fuzz(
      'POST /webhooks/w/{token}',
      fc.tuple(fc.nat({ max: hooks.length - 1 }), payload, fc.boolean(), signature, extra, event, delivery, contentType),
      500,
      async ([which, body, asUtf8, sig, extraHeaders, ev, del, ct]) => {
        const hook = hooks[which]!;
        const raw = Buffer.from(body, asUtf8 ? 'utf8' : 'latin1');
        const hmac = createHmac('sha256', hook.secret ?? 'no secret').update(raw).digest('hex');
        const goodOrWrong = sig === 'wrong' ? createHmac('sha256', 'wrong').update(raw).digest('hex') : hmac;
        const signed: Record<string, string> = {};
        if (sig === 'garbage') Object.assign(signed, { 'x-hub-signature-256': 'sha256=zz', 'x-gitea-signature': 'zz' });
        else if (sig === 'unprefixed') signed['x-hub-signature-256'] = hmac;
        else if (sig !== 'none' && hook.source === 'gitea') signed['x-gitea-signature'] = goodOrWrong;
        else if (sig !== 'none') signed['x-hub-signature-256'] = `sha256=${goodOrWrong}`;
        const headers: Record<string, string> = {
          ...extraHeaders,
          'content-type': ct,
          [hook.source === 'gitea' ? 'x-gitea-event' : 'x-github-event']: ev,
          ...(del !== undefined ? { [hook.source === 'gitea' ? 'x-gitea-delivery' : 'x-github-delivery']: del } : {}),
          ...signed,
        };
        if (!ct) delete headers['content-type'];
        const res = await request(hook.url, { method: 'POST', headers, body: raw });
        if (res.status === 202) expect(res.json).toMatchObject({ todos: [expect.objectContaining({ id: expect.stringMatching(/^td_/) })] });
        return res;
      },
    );
  });

  it('API bodies: vend and push with random JSON, half-valid fields and bytes that are not JSON', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'target', queues: ['reviews', 'inbox'] });
    expect(r.status).toBe(201);
    const slug = r.json.slug as string;
    const rawBody = fc.oneof(anyString, fc.constantFrom('', '{', '{"title":', 'null', '[]', '"x"', '{"title":"a","title":"b"}', '{"title":"\\ud800x","queue":"reviews"}'));
    const asBody = <T>(arb: fc.Arbitrary<T>) =>
      fc.tuple(
        fc.oneof({ weight: 6, arbitrary: arb.map((v) => JSON.stringify(v)) }, { weight: 1, arbitrary: rawBody }),
        fc.oneof({ weight: 10, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: contentType }),
      );
    const vendBody = fc.oneof(
      {
        weight: 5,
        arbitrary: fc.record(
          {
            name: mostly(fc.oneof(fc.stringMatching(/^[a-z][a-z0-9 -]{0,40}$/), fc.string({ unit: 'grapheme', minLength: 1 }))),
            queues: mostly(fc.array(mostly(fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,70}$/)), { maxLength: 4 })),
            verbs: mostly(fc.array(fc.oneof(fc.constantFrom(...DRAIN_VERBS, ...WEBHOOK_VERBS, 'clock_in', 'nope'), anyString), { maxLength: 4 })),
          },
          { requiredKeys: [] },
        ),
      },
      { weight: 1, arbitrary: fc.dictionary(anyString, anyJson, { maxKeys: 4 }) },
      { weight: 1, arbitrary: anyJson },
    );
    const pushBody = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record(
          {
            title: mostly(fc.oneof({ weight: 6, arbitrary: fc.string({ minLength: 1, maxLength: 80 }) }, { weight: 1, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ minLength: 190, maxLength: 260 }) }), 8),
            queue: mostly(fc.constantFrom('reviews', 'inbox', 'reviews', 'inbox', 'elsewhere', '_switchboard', ''), 8),
            kind: mostly(fc.stringMatching(/^[A-Za-z0-9._:-]{1,64}$/), 6),
            payload: anyJson,
            key: mostly(fc.oneof({ weight: 6, arbitrary: fc.string({ minLength: 1, maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }) }, { weight: 1, arbitrary: fc.string({ minLength: 250, maxLength: 300 }) }), 6),
          },
          { requiredKeys: ['title', 'queue'] },
        ),
      },
      { weight: 1, arbitrary: fc.dictionary(anyString, anyJson, { maxKeys: 4 }) },
      { weight: 1, arbitrary: anyJson },
    );
    const post = async (path: string, [b, ct]: [string, string]): Promise<Outcome> =>
      request(`${app.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${humanToken}`, ...(ct ? { 'content-type': ct } : {}) }, body: b });
    await fuzz('POST /api/v1/endpoints (vend)', asBody(vendBody), 300, (input) => post('/api/v1/endpoints', input));
    await fuzz('POST /api/v1/endpoints/{ref}/todos (push)', asBody(pushBody), 400, (input) => post(`/api/v1/endpoints/${slug}/todos`, input));

    // The server still does its job.
    const ok = await api('POST', `/api/v1/endpoints/${slug}/todos`, { title: 'after the fuzz', queue: 'reviews' });
    expect(ok.status).toBe(201);
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  });

  it('random path segments where a slug, a ref, an ingest token or a board id goes', async () => {
    const r = await api('POST', '/api/v1/endpoints', { name: 'paths', queues: ['reviews'] });
    expect(r.status).toBe(201);
    const e = r.json as { slug: string; token: string };
    const board = await boardSignIn();
    const door = fc.constantFrom(
      (seg: string) => ({ method: 'GET', path: `/api/v1/endpoints/${seg}` }),
      (seg: string) => ({ method: 'GET', path: `/api/v1/endpoints/${seg}/todos` }),
      (seg: string) => ({ method: 'POST', path: `/api/v1/endpoints/${seg}/todos`, body: { title: 'x' } }),
      (seg: string) => ({ method: 'PUT', path: `/api/v1/endpoints/${seg}/shift`, body: { shift: '09:00-17:00' } }),
      (seg: string) => ({ method: 'PUT', path: `/api/v1/endpoints/${seg}/presence`, body: { presence: 'out' } }),
      (seg: string) => ({ method: 'POST', path: `/api/v1/endpoints/${seg}/revoke` }),
      (seg: string) => ({ method: 'POST', path: `/api/v1/webhooks/${seg}/rotate` }),
      (seg: string) => ({ method: 'DELETE', path: `/api/v1/webhooks/${seg}` }),
      (seg: string) => ({ method: 'GET', path: `/api/v1/events?endpoint=${seg}` }),
      (seg: string) => ({ method: 'POST', path: `/webhooks/w/${seg}`, body: { action: 'opened' } }),
      (seg: string) => ({ method: 'POST', path: `/mcp/${seg}`, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} }, mcp: true }),
      (seg: string) => ({ method: 'GET', path: `/mcp/${seg}`, mcp: true }),
      // The board: every route with an id, POSTs with a valid CSRF token.
      ...[`/endpoints/{}`, `/endpoints/{}/revoke`, `/todos/{}`].map((p) => (seg: string) => ({ method: 'GET', path: p.replace('{}', seg), board: true })),
      ...['presence', 'presence/clear', 'shift', 'self-test', 'revoke'].map((v) => (seg: string) => ({ method: 'POST', path: `/endpoints/${seg}/${v}`, board: true })),
    );
    await fuzz('random {slug} / {ref} / {token} / {id} in paths', fc.tuple(door, pathSegment), 400, async ([make, seg]) => {
      const d = make(seg) as { method: string; path: string; body?: unknown; mcp?: boolean; board?: boolean };
      const form = d.board && d.method === 'POST' ? new URLSearchParams({ csrf_token: board.csrf, presence: 'out', shift: '09:00-17:00' }).toString() : undefined;
      const res = await request(`${app.url}${d.path}`, {
        method: d.method,
        redirect: 'manual',
        headers: d.board
          ? { cookie: board.cookie, ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) }
          : {
              authorization: `Bearer ${d.mcp ? e.token : humanToken}`,
              ...(d.mcp ? { accept: 'application/json, text/event-stream' } : {}),
              ...(d.body ? { 'content-type': 'application/json' } : {}),
            },
        body: form ?? (d.body ? JSON.stringify(d.body) : undefined),
        signal: AbortSignal.timeout(5000),
      });
      return { ...res, answer: `${d.method} ${d.path.slice(0, 200)} → ${res.answer}` };
    });
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  });
});
