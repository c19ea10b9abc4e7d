import { execFile } from 'node:child_process';
import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { connectAgent, until } from '../../test/support/agents.ts';
import type { TestApp } from '../../test/support/fixtures.ts';
import { VERSION } from '../lib/version.ts';
import { main } from './main.ts';

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let home: string;

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url);
  home = await mkdtemp(join(tmpdir(), 'sbcli-'));
});
afterAll(async () => {
  await app.stop();
  await db.drop();
});

/** A port nothing listens on: bind one, then let it go. */
async function closedPort(): Promise<number> {
  const { createServer } = await import('node:net');
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** A front for the app that answers /healthz 503 (as when the database is down) and passes the rest through. */
async function healthzDownFront(): Promise<{ url: string; close(): Promise<unknown> }> {
  const { createServer } = await import('node:http');
  const srv = createServer((req, res) => {
    if (req.url === '/healthz') return void res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end('db down\n');
    const headers: Record<string, string> = {};
    for (const h of ['authorization', 'accept', 'content-type']) if (typeof req.headers[h] === 'string') headers[h] = req.headers[h];
    void fetch(`${app.url}${req.url}`, { method: req.method, headers }).then(async (upstream) => {
      res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'text/plain' }).end(Buffer.from(await upstream.arrayBuffer()));
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(srv.address() as { port: number }).port}`, close: () => new Promise((r) => srv.close(r)) };
}

interface Run {
  code: number;
  out: string;
  err: string;
}

/** Runs the CLI in-process with its own environment; stdin is given text. */
async function run(args: string[], env: Record<string, string> = {}, stdin = ''): Promise<Run> {
  let out = '';
  let err = '';
  const code = await main(['node', 'switchboard', ...args], {
    io: { out: (t) => void (out += t), err: (t) => void (err += t) },
    env: { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), SWITCHBOARD_DATABASE_URL: db.url, ...env },
    readStdin: async () => stdin,
    stdinIsTty: false,
  });
  return { code, out, err };
}

describe('switchboard CLI, the path a new user walks', () => {
  let token = '';
  let slug = '';
  const authEnv = () => ({ SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: token });

  it('admin human add / token create act on the database and print the token once', async () => {
    const added = await run(['admin', 'human', 'add', 'ops']);
    expect(added).toMatchObject({ code: 0 });
    expect(added.out).toContain('Added human ops');
    const created = await run(['admin', 'token', 'create', 'ops']);
    expect(created.code).toBe(0);
    token = created.out.trim();
    expect(token).toMatch(/^sbp_[A-Za-z0-9_-]{43}$/);
    expect(created.err).toContain('shown once');
    const listed = await run(['admin', 'token', 'list', 'ops']);
    expect(listed.out).toContain(token.slice(0, 12));
    expect(listed.out).not.toContain(token);
  });

  it('endpoint vend prints the credential once, as an export line, then both ways to connect Claude Code', async () => {
    const r = await run(['endpoint', 'vend', 'review-bot', '--queue', 'reviews', '--queue', 'inbox'], authEnv());
    expect(r.code).toBe(0);
    slug = /Vended endpoint (review-bot-[0-9a-f]{8})/.exec(r.out)![1]!;
    const credential = /^ {2}export SWITCHBOARD_AGENT_TOKEN=(sbk_[A-Za-z0-9_-]{43})$/m.exec(r.out)![1]!;
    expect(r.out.split(credential)).toHaveLength(2);
    const mcpUrl = `${app.baseUrl}/mcp/${slug}`;
    expect(r.out).toContain(`  MCP URL     ${mcpUrl}\n`);
    expect(r.out).toContain('Queues      reviews, inbox');
    // Both .mcp.json snippets, as JSON that parses, name the variable and not the secret.
    const snippets = [...r.out.matchAll(/^ {2}\{\n[\s\S]*?\n {2}\}$/gm)].map((m) => JSON.parse(m[0]));
    expect(snippets).toEqual([
      { mcpServers: { switchboard: { command: 'switchboard', args: ['bridge', '--url', mcpUrl], env: { SWITCHBOARD_AGENT_TOKEN: '${SWITCHBOARD_AGENT_TOKEN}' } } } },
      { mcpServers: { switchboard: { type: 'http', url: mcpUrl, headers: { Authorization: 'Bearer ${SWITCHBOARD_AGENT_TOKEN}' } } } },
    ]);
    expect(r.out).toContain('  claude --dangerously-load-development-channels server:switchboard --allowedTools mcp__switchboard\n');
    expect(r.out).toContain('2.1.80 or later, signed in with a claude.ai account');
    expect(r.out).toContain('`claim_next` with `wait`');
    expect(r.out).toContain(`Guide: ${app.baseUrl}/docs/connect\n`);
  });

  it('endpoint list and show print the endpoint, never a credential', async () => {
    const list = await run(['endpoint', 'list'], authEnv());
    expect(list.code).toBe(0);
    expect(list.out).toMatch(new RegExp(`${slug}\\s+review-bot\\s+active\\s+in \\(default\\)\\s+reviews,inbox`));
    expect(list.out).not.toContain('sbk_');
    const json = await run(['endpoint', 'list', '--json'], authEnv());
    expect(JSON.parse(json.out)[0]).toMatchObject({ slug, state: 'active', queues: ['reviews', 'inbox'] });
    const show = await run(['endpoint', 'show', slug], authEnv());
    expect(show.out).toContain(`Slug       ${slug}`);
  });

  it('todo push and todo list, with the payload inline, from a file and from stdin', async () => {
    const r = await run(['todo', 'push', slug, '--queue', 'reviews', '--title', 'Review PR 12', '--payload', '{"pr":12}'], authEnv());
    expect(r).toMatchObject({ code: 0 });
    expect(r.out).toMatch(/^Created td_[0-9a-f-]{36} on review-bot-[0-9a-f]{8}\/reviews\.\n$/);
    const file = join(home, 'payload.json');
    await writeFile(file, '{"pr":13}');
    expect((await run(['todo', 'push', slug, 'Review PR 13', '-q', 'reviews', '--payload', `@${file}`], authEnv())).code).toBe(0);
    expect((await run(['todo', 'push', slug, 'Review PR 14', '-q', 'inbox', '--payload', '@-', '--json'], authEnv(), '{"pr":14}')).code).toBe(0);
    const list = await run(['todo', 'list', slug, '--json'], authEnv());
    expect(JSON.parse(list.out).todos.map((t: { title: string }) => t.title)).toEqual(['Review PR 14', 'Review PR 13', 'Review PR 12']);
    const table = await run(['todo', 'list', slug, '--queue', 'reviews'], authEnv());
    expect(table.out.split('\n')[0]).toMatch(/^ID\s+QUEUE\s+STATE\s+ATTEMPT\s+CREATED\s+TITLE$/);
    expect(table.out).not.toContain('Review PR 14');
  });

  it('endpoint clock-out, presence, shift and clock-in', async () => {
    const out = await run(['endpoint', 'clock-out', slug], authEnv());
    expect(out).toMatchObject({ code: 0 });
    expect(out.out).toContain(`${slug} is out (operator)`);
    // The board's words: the source as the API names it, then the reason; never "off shift" without a shift.
    expect(out.out).toContain('  reason   clocked out by a human\n');
    expect((await run(['endpoint', 'show', slug], authEnv())).out).toMatch(/^Presence {3}out \(operator\): clocked out by a human$/m);
    const shift = await run(['endpoint', 'shift', slug, 'TZ=Europe/Berlin Mon 09:00-10:00', '--json'], authEnv());
    expect(JSON.parse(shift.out)).toMatchObject({ shift: 'TZ=Europe/Berlin Mon 09:00-10:00' });
    const bad = await run(['endpoint', 'shift', slug, 'Mon 09:00-09:00'], authEnv());
    expect(bad.code).toBe(2); // the server's invalid_argument is a usage mistake too
    expect(bad.err).toMatch(/^switchboard: EXPR: .*\(invalid_argument\)\n$/);
    expect((await run(['endpoint', 'shift', slug], authEnv())).code).toBe(2);
    expect((await run(['endpoint', 'clock-in', slug, '--until', 'someday'], authEnv())).code).toBe(2);
    expect((await run(['endpoint', 'clock-in', slug, '--until', '90m'], authEnv())).out).toContain(`${slug} is in (operator)`);
    expect((await run(['endpoint', 'shift', slug, '--clear'], authEnv())).code).toBe(0);
    const cleared = await run(['endpoint', 'presence', slug, '--clear', '--json'], authEnv());
    expect(JSON.parse(cleared.out)).toMatchObject({ presence: 'in', source: 'default', shift: null });
    const plain = (await run(['endpoint', 'presence', slug], authEnv())).out;
    expect(plain).toContain(`${slug} is in (default)\n  reason   no shift and no override\n`);
    expect(plain).not.toMatch(/on shift|off shift/);
  });

  it('endpoint revoke asks first; only "y" proceeds; a self-test todo is ended, not dead-lettered', async () => {
    const started = await fetch(`${app.url}/api/v1/endpoints/${slug}/doorbell-tests`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ wait_seconds: 10 }),
    });
    expect(started.status).toBe(201);
    const { todo_id: testTodo } = (await started.json()) as { todo_id: string };
    const declined = await run(['endpoint', 'revoke', slug], authEnv(), 'n\n');
    expect(declined.code).toBe(1);
    expect(declined.err).toContain('not revoked');
    const yes = await run(['endpoint', 'revoke', slug], authEnv(), 'y\n');
    expect(yes.code).toBe(0);
    expect(yes.out).toContain(`Revoked ${slug}; 3 live todo(s) dead-lettered.`);
    const [ended] = await db.sql<{ state: string; result: unknown }[]>`select state, result from todos where id = ${testTodo}`;
    expect(ended).toMatchObject({ state: 'done', result: { self_test: true } });
    const again = await run(['endpoint', 'revoke', slug, '-y'], authEnv());
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/^switchboard: .*already revoked \(conflict\)\n$/);
  });
});

describe('switchboard CLI errors and exit codes', () => {
  it('exits 2 on a usage mistake and 1 on a refusal, with one line on stderr', async () => {
    const unknown = await run(['endpoint', 'frobnicate']);
    expect(unknown.code).toBe(2);
    const missingArg = await run(['todo', 'push']);
    expect(missingArg.code).toBe(2);
    // A payload that is not JSON names --payload once, as its field, then where the text came from.
    const creds = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: 'sbp_x' };
    const badPayload = await run(['todo', 'push', 'x', 't', '--payload', '{nope'], creds);
    expect(badPayload.code).toBe(2);
    expect(badPayload.err).toMatch(/^switchboard: --payload: is not valid JSON \(.+\)\n$/);
    const badFile = join(home, 'not-json.json');
    await writeFile(badFile, '{nope');
    const fromFile = await run(['todo', 'push', 'x', 't', '--payload', `@${badFile}`], creds);
    expect(fromFile).toMatchObject({ code: 2, err: expect.stringMatching(new RegExp(`^switchboard: --payload: ${badFile} is not valid JSON \\(`)) });
    const fromStdin = await run(['todo', 'push', 'x', 't', '--payload', '@-'], creds, '{nope');
    expect(fromStdin).toMatchObject({ code: 2, err: expect.stringMatching(/^switchboard: --payload: stdin is not valid JSON \(/) });
    for (const r of [badPayload, fromFile, fromStdin]) expect(r.err.split('--payload').length - 1).toBe(1);
    const badToken = await run(['endpoint', 'list'], { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: 'sbp_wrong' });
    expect(badToken).toMatchObject({ code: 1, out: '' });
    expect(badToken.err).toMatch(/^switchboard: .*\(unauthenticated\)\n$/);
  });

  it('says how to log in when no credentials are configured', async () => {
    const r = await run(['endpoint', 'list']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('not logged in');
  });

  it('reports an unreachable server in one line', async () => {
    const port = await closedPort();
    const r = await run(['endpoint', 'list'], { SWITCHBOARD_URL: `http://127.0.0.1:${port}`, SWITCHBOARD_TOKEN: 'sbp_x' });
    expect(r.code).toBe(1);
    expect(r.err).toBe(`switchboard: cannot reach http://127.0.0.1:${port} (from SWITCHBOARD_URL): connection refused (ECONNREFUSED); is the server running there?\n`);
  });

  it('refuses a bad configuration naming the variable', async () => {
    const r = await run(['admin', 'human', 'list'], { SWITCHBOARD_DATABASE_URL: 'mysql://nope' });
    expect(r.code).toBe(1);
    expect(r.err).toContain('SWITCHBOARD_DATABASE_URL');
  });
});

describe('switchboard login / logout', () => {
  it('checks the token, saves it with mode 0600, and later commands use it', async () => {
    await run(['admin', 'human', 'add', 'loginner']);
    const token = (await run(['admin', 'token', 'create', 'loginner'])).out.trim();
    const bad = await run(['login', '--url', app.url, '--token', 'sbp_bad']);
    expect(bad.code).toBe(1);
    const ok = await run(['login', '--url', app.url, '--token', token]);
    expect(ok.code).toBe(0);
    const path = join(home, '.config', 'switchboard', 'credentials.json');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual({ url: app.url, token });
    expect((await run(['endpoint', 'list'])).code).toBe(0);
    expect((await run(['logout'])).out).toBe('Logged out.\n');
    expect((await run(['endpoint', 'list'])).code).toBe(1);
  });
});

describe('switchboard doctor', () => {
  it('proves the loop against a listening agent: prints pass and exits 0', async () => {
    await run(['admin', 'human', 'add', 'doc']);
    const token = (await run(['admin', 'token', 'create', 'doc'])).out.trim();
    const env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: token };
    const vend = JSON.parse((await run(['endpoint', 'vend', 'listener', '--json'], env)).out) as { slug: string; token: string; mcp_url: string };
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const agent = new Client({ name: 'claude-code', version: '2.1.0' });
    agent.fallbackNotificationHandler = async (n) => {
      const meta = (n.params as { meta?: Record<string, string> }).meta;
      if (meta?.todo_id) await agent.callTool({ name: 'claim', arguments: { id: meta.todo_id } });
    };
    const transport = new StreamableHTTPClientTransport(new URL(vend.mcp_url), { requestInit: { headers: { Authorization: `Bearer ${vend.token}` } } });
    await agent.connect(transport);
    try {
      const deadline = Date.now() + 5000;
      while (!app.services.sessions.all().some((s) => s.id === transport.sessionId && s.stream) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const r = await run(['doctor', vend.slug, '--wait', '30s'], env);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      expect(r.out).toContain('credentials for');
      expect(r.out).toMatch(new RegExp(`${vend.slug}\\s+active\\s+in\\s+1\\s+0`));
      expect(r.out).toContain('verdict: pass');
      expect(r.out).toMatch(/claimed within [\d.]+ s of the doorbell/);
    } finally {
      await agent.close();
    }
  }, 30_000);

  it("exits 1 on someone else's endpoint exactly as on a missing one, starting nothing, and 2 on a bad --wait", async () => {
    await run(['admin', 'human', 'add', 'doc2']);
    const env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: (await run(['admin', 'token', 'create', 'doc2'])).out.trim() };
    await run(['admin', 'human', 'add', 'doc2-neighbour']);
    const neighbour = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: (await run(['admin', 'token', 'create', 'doc2-neighbour'])).out.trim() };
    const theirs = JSON.parse((await run(['endpoint', 'vend', 'theirs', '--json'], neighbour)).out) as { id: string; slug: string };
    const foreign = await run(['doctor', theirs.slug], env);
    expect(foreign.code).toBe(1);
    expect(foreign.err).toBe(`switchboard: endpoint ${theirs.slug} was not found among yours\n`);
    expect(await db.sql`select 1 from doorbell_tests where endpoint_id = ${theirs.id}`).toHaveLength(0);
    const missing = await run(['doctor', 'nobody-00000000'], env);
    expect(missing.code).toBe(1);
    expect(missing.err).toBe('switchboard: endpoint nobody-00000000 was not found among yours\n');
    expect((await run(['doctor', '--wait', '5s'], env)).code).toBe(2);
    const plain = await run(['doctor', '--json'], env);
    expect(plain.code).toBe(0);
    expect(JSON.parse(plain.out)).toMatchObject({ credentials: { live: true }, server: { healthy: true, warning: null }, endpoints: [], failed: [] });
  });

  it('reports a revoked endpoint by its state, with no presence: null in --json, - in the table', async () => {
    await run(['admin', 'human', 'add', 'doc4']);
    const env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: (await run(['admin', 'token', 'create', 'doc4'])).out.trim() };
    const live = JSON.parse((await run(['endpoint', 'vend', 'still-here', '--json'], env)).out) as { slug: string };
    const gone = JSON.parse((await run(['endpoint', 'vend', 'gone', '--json'], env)).out) as { slug: string };
    expect((await run(['endpoint', 'revoke', gone.slug, '-y'], env)).code).toBe(0);
    const json = await run(['doctor', '--json'], env);
    expect(json.code, json.err).toBe(0);
    const listed = (JSON.parse(json.out) as { endpoints: { slug: string }[] }).endpoints;
    expect(listed.find((e) => e.slug === gone.slug)).toEqual({ slug: gone.slug, state: 'revoked', presence: null, sessions: 0, unheard_sessions: 0, idle_sessions_ended: 0 });
    expect(listed.find((e) => e.slug === live.slug)).toMatchObject({ state: 'active', presence: 'in' });
    const text = await run(['doctor'], env);
    expect(text.out).toMatch(new RegExp(`${gone.slug}\\s+revoked\\s+-\\s+0\\s+0`));
    expect(text.out).toMatch(new RegExp(`${live.slug}\\s+active\\s+in\\s+0\\s+0`));
    const list = await run(['endpoint', 'list'], env);
    expect(list.out).toMatch(new RegExp(`${gone.slug}\\s+gone\\s+revoked\\s+-\\s`));
  });

  it('counts live sessions only, and says how many idle ones were ended (SWITCHBOARD_SESSION_IDLE, 5 minutes)', async () => {
    await run(['admin', 'human', 'add', 'doc5']);
    const env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: (await run(['admin', 'token', 'create', 'doc5'])).out.trim() };
    const e = JSON.parse((await run(['endpoint', 'vend', 'busy', '--json'], env)).out) as { slug: string; token: string };
    const stays = await connectAgent(app, e);
    // Two clients that leave without DELETE, as the Inspector CLI and mcp-remote do.
    for (const gone of [await connectAgent(app, e), await connectAgent(app, e)]) {
      await gone.client.close();
      await until(() => app.services.sessions.peek(gone.sessionId)?.stream === null, 'its stream closed');
    }
    const listed = async () => (JSON.parse((await run(['doctor', '--json'], env)).out) as { endpoints: { slug: string }[] }).endpoints.find((x) => x.slug === e.slug);
    expect(await listed()).toMatchObject({ sessions: 3, idle_sessions_ended: 0 });
    app.clock.advance(5 * 60_000 + 1000);
    await stays.client.ping(); // the open stream keeps it live anyway; a call too
    await app.services.directory.flush();
    // Dead before the janitor's next pass: not counted.
    expect(await listed()).toMatchObject({ sessions: 1, idle_sessions_ended: 0 });
    expect(await app.services.directory.expireIdle()).toBeGreaterThanOrEqual(2);
    expect(await listed()).toMatchObject({ sessions: 1, idle_sessions_ended: 2 });
    const text = await run(['doctor'], env);
    expect(text.out).toMatch(new RegExp(`${e.slug}\\s+active\\s+in\\s+1\\s+0\\s+2`));
    expect(text.out).toContain('IDLE ENDED');
    await stays.client.close();
  });

  it('exits 1 when /healthz fails, naming it, though every other check passes', async () => {
    await run(['admin', 'human', 'add', 'doc3']);
    const token = (await run(['admin', 'token', 'create', 'doc3'])).out.trim();
    const front = await healthzDownFront();
    try {
      const r = await run(['doctor'], { SWITCHBOARD_URL: front.url, SWITCHBOARD_TOKEN: token });
      expect(r.out).toContain('credentials for');
      expect(r.out).toContain(`✗ ${front.url}/healthz failed: HTTP 503 db down`);
      expect(r.code).toBe(1);
      expect(r.err).toBe(`switchboard: ${front.url}/healthz failed: HTTP 503 db down\n`);
      const json = await run(['doctor', '--json'], { SWITCHBOARD_URL: front.url, SWITCHBOARD_TOKEN: token });
      expect(json.code).toBe(1);
      expect(JSON.parse(json.out)).toMatchObject({ server: { healthy: false, version: null }, failed: [expect.stringContaining('/healthz failed')] });
    } finally {
      await front.close();
    }
  });

  it('exits 1 on an unheard self-test and prints its hints with the guide links as URLs of the server', async () => {
    await run(['admin', 'human', 'add', 'doc5']);
    const env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: (await run(['admin', 'token', 'create', 'doc5'])).out.trim() };
    const e = JSON.parse((await run(['endpoint', 'vend', 'ignores-tests', '--json'], env)).out) as { id: string; slug: string; token: string };
    const agent = await connectAgent(app, e, { name: 'some-other-client' });
    try {
      const doctor = run(['doctor', e.slug, '--wait', '10s'], env);
      await until(() => agent.tests().length === 1, 'the test doorbell', 10_000);
      await until(async () => (await db.sql`select 1 from doorbell_tests where endpoint_id = ${e.id} and delivery = 'written'`).length === 1, 'the delivery record');
      app.clock.advance(11_000); // the wait is over and nothing claimed
      const r = await doctor;
      expect(r.out).toContain('verdict: unheard');
      expect(r.out).toContain(`  - See the connect guide for your client: ${app.url}/docs/connect#other-mcp-clients\n`);
      expect(r.out).toContain(`  - Troubleshooting: ${app.url}/docs/connect#troubleshooting on this Switchboard server\n`);
      expect(r.code).toBe(1);
      expect(r.err).toBe('switchboard: the self-test did not pass (verdict unheard)\n');
    } finally {
      await agent.client.close();
    }
  }, 30_000);

  it('exits 1 while a session of an endpoint that is in is unheard, and names the endpoint', async () => {
    await run(['admin', 'human', 'add', 'doc4']);
    const env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: (await run(['admin', 'token', 'create', 'doc4'])).out.trim() };
    const e = JSON.parse((await run(['endpoint', 'vend', 'deaf-bot', '--queue', 'reviews', '--json'], env)).out) as { id: string; slug: string; token: string };
    const agent = await connectAgent(app, e);
    try {
      for (const n of [1, 2, 3]) expect((await run(['todo', 'push', e.slug, `unheard ${n}`], env)).code).toBe(0);
      await until(async () => (await db.sql`select 1 from doorbell_rings where endpoint_id = ${e.id}`).length === 3, 'three ring records');
      expect((await run(['doctor'], env)).code).toBe(0);
      app.clock.advance(16 * 60_000); // past the 15-minute ack window: the three rings go unheard
      await app.services.acks.sweep();
      expect(app.services.sessions.all().find((s) => s.id === agent.sessionId)?.unheard).toBe(true);
      const r = await run(['doctor'], env);
      expect(r.out).toMatch(new RegExp(`${e.slug}\\s+active\\s+in\\s+1\\s+1`));
      expect(r.code).toBe(1);
      expect(r.err).toContain(`${e.slug} has 1 unheard session(s)`);
    } finally {
      await agent.client.close();
    }
  });

  it('with REF the verdict decides: a pass exits 0 while another endpoint has an unheard session, which is only warned of', async () => {
    await run(['admin', 'human', 'add', 'doc6']);
    const env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: (await run(['admin', 'token', 'create', 'doc6'])).out.trim() };
    const deaf = JSON.parse((await run(['endpoint', 'vend', 'deaf-one', '--json'], env)).out) as { id: string; slug: string; token: string };
    const good = JSON.parse((await run(['endpoint', 'vend', 'good-one', '--json'], env)).out) as { id: string; slug: string; token: string };
    const deafAgent = await connectAgent(app, deaf);
    const goodAgent = await connectAgent(app, good);
    try {
      for (const n of [1, 2, 3]) expect((await run(['todo', 'push', deaf.slug, `never heard ${n}`], env)).code).toBe(0);
      await until(async () => (await db.sql`select 1 from doorbell_rings where endpoint_id = ${deaf.id}`).length === 3, 'three ring records');
      app.clock.advance(16 * 60_000); // three rings unheard past the ack window mark the session
      await app.services.acks.sweep();
      expect(app.services.sessions.all().find((s) => s.id === deafAgent.sessionId)?.unheard).toBe(true);
      const doctor = run(['doctor', good.slug, '--wait', '10s', '--json'], env);
      await until(() => goodAgent.tests().length === 1, 'the test doorbell', 10_000);
      expect(await goodAgent.call('claim', { id: goodAgent.tests()[0]!.params.meta.todo_id })).toMatchObject({ self_test: true });
      const r = await doctor;
      const json = JSON.parse(r.out);
      expect(json.test.verdict).toBe('pass');
      expect(json.failed).toEqual([]);
      expect(json.warnings).toEqual([expect.stringContaining(`${deaf.slug} has 1 unheard session(s)`)]);
      expect(r.code).toBe(0);
      // Without REF the same listing fails the run.
      const listing = await run(['doctor'], env);
      expect(listing.code).toBe(1);
      expect(listing.err).toContain(`${deaf.slug} has 1 unheard session(s)`);
    } finally {
      await deafAgent.client.close();
      await goodAgent.client.close();
    }
  }, 30_000);
});

describe('the installed bin', () => {
  it('runs from bin/switchboard.js', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/switchboard.js', '--version']);
    expect(stdout.trim()).toBe(VERSION);
  });
});
