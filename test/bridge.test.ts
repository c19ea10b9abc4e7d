import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { INSTRUCTIONS } from '../src/mcp/protocol.ts';
import { until, untilRingRecorded, type Notification } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, push, startTestApp, vend, type Api, type TestApp, type TestDb, type Vended } from './support/fixtures.ts';
import { SWITCHBOARD_BIN } from './support/processes.ts';

// `switchboard bridge --url` as Claude Code runs it: a child process on stdio, driven by the SDK's
// own StdioClientTransport, in front of a real app reached through a relay whose URL stays the
// same when the app behind it is replaced.

/** A TCP relay on a fixed port whose backend can be switched (or dropped: connections are refused by closing them). */
async function switchableRelay() {
  let backend: number | null = null;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => {});
    if (backend === null) return void client.destroy();
    const upstream = connect(backend, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    to(port: number | null) {
      backend = port;
      if (port === null) for (const s of sockets) s.destroy();
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

let db: TestDb;
let app: TestApp;
let relay: Awaited<ReturnType<typeof switchableRelay>>;
let api: Api;
let humanToken: string;
const bridges: Bridge[] = [];

const portOf = (a: TestApp) => Number(new URL(a.url).port);
const start = () => startTestApp(db.url, undefined, { selfTestRingDelayMs: 200 });

beforeAll(async () => {
  db = await migratedDatabase();
  app = await start();
  relay = await switchableRelay();
  relay.to(portOf(app));
  humanToken = (await humanWithToken(db.sql)).token;
  api = apiCaller(app.url, humanToken);
});

// The limiters read the app's manual clock: move it so every test starts with full buckets.
beforeEach(() => void app.clock.advance(60_000));

afterEach(async () => {
  await Promise.all(bridges.splice(0).map((b) => b.close()));
});

afterAll(async () => {
  await app?.stop();
  await relay?.close();
  await db?.drop();
});

interface Bridge {
  client: Client;
  heard: Notification[];
  stderr: () => string;
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  call: (name: string, args?: Record<string, unknown>) => Promise<{ isError?: boolean; text: string; json?: any }>;
  close: () => Promise<void>;
}

const urlOf = (e: Vended) => `http://127.0.0.1:${relay.port}/mcp/${e.slug}`;

/** The bridge for `e` under the SDK's stdio client, resolved once its notification stream is open on `on`. */
async function bridge(e: Vended, on: TestApp | null = app): Promise<Bridge> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SWITCHBOARD_BIN, 'bridge', '--url', urlOf(e)],
    env: { SWITCHBOARD_AGENT_TOKEN: e.token },
    stderr: 'pipe',
  });
  let err = '';
  transport.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const heard: Notification[] = [];
  const client = new Client({ name: 'claude-code', version: '2.1.99' });
  client.fallbackNotificationHandler = async (n) => void heard.push(n as unknown as Notification);
  await client.connect(transport);
  const child = (transport as unknown as { _process: ChildProcess })._process;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const b: Bridge = {
    client,
    heard,
    stderr: () => err,
    child,
    exited,
    call: async (name, args = {}) => {
      const r = (await client.callTool({ name, arguments: args })) as { isError?: boolean; content: { text: string }[] };
      const text = r.content[0]?.text ?? '';
      let json: any;
      try {
        json = JSON.parse(text);
      } catch {
        /* a plain-text error */
      }
      return { isError: r.isError, text, json };
    },
    close: async () => {
      await client.close().catch(() => {});
      // Whatever the test did, the credential never reached the bridge's output.
      expect(err).not.toContain(e.token);
      expect(err).not.toContain(e.token.slice(4));
    },
  };
  bridges.push(b);
  if (on) await streamOpen(e, on);
  return b;
}

const streamOpen = (e: Vended, on: TestApp) =>
  until(() => on.services.sessions.all().some((s) => s.endpoint.id === e.id && s.stream !== null), 'the bridge stream to open', 15_000);

const channel = (b: Bridge) => b.heard.filter((n) => n.method === 'notifications/claude/channel');

describe('switchboard bridge on stdio', { timeout: 45_000 }, () => {
  it('declares claude/channel, passes on the server instructions, lists the endpoint tools and relays calls and errors as they are', async () => {
    const e = await vend(api, { name: 'bridged', queues: ['reviews'] });
    const b = await bridge(e);
    expect(b.client.getServerCapabilities()).toMatchObject({ tools: { listChanged: true }, experimental: { 'claude/channel': {} } });
    expect(b.client.getInstructions()).toBe(INSTRUCTIONS);
    const names = (await b.client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['claim', 'claim_next', 'complete', 'test_doorbell', 'ack_doorbell', 'presence']));
    // The server saw the stdio client's own name.
    expect(app.services.sessions.all().find((s) => s.endpoint.id === e.id)!.clientInfo.name).toBe('claude-code');

    expect((await b.call('presence')).json).toMatchObject({ presence: 'in' });
    const badArgs = await b.call('claim', { id: 42 });
    expect(badArgs.isError).toBe(true);
    expect(badArgs.text).toMatch(/id/);
    const unknown = await b.client.callTool({ name: 'no_such_tool', arguments: {} }).catch((err: unknown) => err);
    expect(unknown).toBeInstanceOf(McpError);
    expect(unknown).toMatchObject({ code: -32602, message: 'MCP error -32602: Unknown tool: no_such_tool' });
  });

  it('relays the doorbell of a push as notifications/claude/channel, and the claim through the bridge acknowledges it', async () => {
    const e = await vend(api, { name: 'rung', queues: ['reviews'] });
    const b = await bridge(e);
    const todo = await push(api, e, { title: 'Review PR 12', queue: 'reviews' });
    await until(() => channel(b).length === 1, 'the doorbell on stdio');
    const n = channel(b)[0]!;
    expect(n.params.meta).toMatchObject({ todo_id: todo.id, queue: 'reviews', ring_id: expect.stringMatching(/^rg_/) });
    expect(n.params.content).toContain(todo.id);
    await untilRingRecorded(db.sql, { ring_id: n.params.meta.ring_id! });
    expect((await b.call('claim', { id: todo.id })).json).toMatchObject({ id: todo.id, state: 'claimed' });
    const ring = await db.sql`select acked_at from doorbell_rings where ring_id = ${n.params.meta.ring_id!}`;
    expect(ring[0]!.acked_at).not.toBeNull();
  });

  it('relays the digest an endpoint gets when it clocks in with work waiting', async () => {
    const e = await vend(api, { name: 'digested', queues: ['reviews', 'lane-m'] });
    const b = await bridge(e);
    expect((await b.call('clock_out')).json).toMatchObject({ presence: 'out' });
    await push(api, e, { title: 'one', queue: 'reviews' });
    await push(api, e, { title: 'two', queue: 'lane-m' });
    await new Promise((r) => setTimeout(r, 200));
    expect(channel(b)).toEqual([]);
    expect((await b.call('clock_in')).json).toMatchObject({ presence: 'in' });
    await until(() => channel(b).length === 1, 'the digest on stdio');
    expect(channel(b)[0]!.params.meta).toMatchObject({ kind: 'digest', pending: '2', queues: 'lane-m,reviews', ring_id: expect.stringMatching(/^rg_/) });
    expect(channel(b)[0]!.params.meta.todo_id).toBeUndefined();
  });

  it('passes the doorbell self-test when the stdio client claims the todo the relayed test doorbell names', async () => {
    const e = await vend(api, { name: 'tested', queues: ['reviews'] });
    const b = await bridge(e);
    const started = (await b.call('test_doorbell', { wait_seconds: 30 })).json;
    expect(started).toMatchObject({ stream_attached: true, channel_capability: { sessions: [{ client_name: 'claude-code', stream_open: true }] } });
    await until(() => channel(b).some((n) => n.params.meta.kind === 'self_test'), 'the test doorbell on stdio');
    const ring = channel(b).find((n) => n.params.meta.kind === 'self_test')!;
    expect(ring.params.meta.todo_id).toBe(started.todo_id);
    expect((await b.call('claim', { id: ring.params.meta.todo_id })).isError).toBeFalsy();
    let report: any;
    await until(async () => (report = (await b.call('get_doorbell_test', { test_id: started.test_id })).json).verdict !== 'pending', 'the verdict');
    expect(report).toMatchObject({ verdict: 'pass', delivered: { written: true }, hints: [] });
  });

  it('survives a server restart behind the same URL: calls meanwhile answer at once, and the next doorbell arrives', async () => {
    const e = await vend(api, { name: 'restarted', queues: ['reviews'] });
    const b = await bridge(e);
    await streamOpen(e, app);
    await until(() => /notification stream open/.test(b.stderr()), 'the bridge to say its stream is open');
    relay.to(null);
    await app.stop();
    const t0 = Date.now();
    const down = await b.call('presence');
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(down.isError).toBe(true);
    expect(down.text).toMatch(/^switchboard unreachable, retrying/);

    app = await start();
    api = apiCaller(app.url, humanToken);
    relay.to(portOf(app));
    await streamOpen(e, app);
    const todo = await push(api, e, { title: 'after the restart', queue: 'reviews' });
    await until(() => channel(b).some((n) => n.params.meta.todo_id === todo.id), 'the doorbell after the restart', 10_000);
    expect((await b.call('presence')).json).toMatchObject({ presence: 'in' });
    expect(b.stderr()).toMatch(/switchboard bridge: notification stream open[\s\S]*retrying[\s\S]*notification stream open/);
  }, 60_000);

  it('starts a new session when the server no longer knows its own (404), and the next doorbell arrives on it', async () => {
    const e = await vend(api, { name: 'forgotten', queues: ['reviews'] });
    const b = await bridge(e);
    const old = app.services.sessions.all().find((s) => s.endpoint.id === e.id)!.id;
    const res = await fetch(`${app.url}/mcp/${e.slug}`, { method: 'DELETE', headers: { authorization: `Bearer ${e.token}`, 'mcp-session-id': old } });
    expect(res.status).toBe(204);
    await until(() => app.services.sessions.all().some((s) => s.endpoint.id === e.id && s.id !== old && s.stream !== null), 'a new session with its stream', 15_000);
    const todo = await push(api, e, { title: 'on the new session', queue: 'reviews' });
    await until(() => channel(b).some((n) => n.params.meta.todo_id === todo.id), 'the doorbell on the new session', 15_000);
    expect(b.stderr()).toMatch(/no longer knows this session; starting a new one/);
  }, 30_000);

  it('starts while the server is unreachable: the client is answered, calls fail at once, and once connected the tools are announced again and doorbells flow', async () => {
    const e = await vend(api, { name: 'cold', queues: ['reviews'] });
    relay.to(null);
    try {
      const b = await bridge(e, null);
      expect(b.client.getServerCapabilities()).toMatchObject({ experimental: { 'claude/channel': {} } });
      expect(b.client.getInstructions()).toMatch(/not reachable when this session started/);
      const list = await b.client.listTools().catch((err: unknown) => err);
      expect(list).toBeInstanceOf(McpError);
      expect((list as McpError).message).toMatch(/switchboard unreachable, retrying/);
      const t0 = Date.now();
      const call = await b.call('presence');
      expect(Date.now() - t0).toBeLessThan(5_000);
      expect(call).toMatchObject({ isError: true, text: expect.stringMatching(/^switchboard unreachable, retrying .*the call was not sent/) });

      relay.to(portOf(app));
      await streamOpen(e, app);
      await until(() => b.heard.some((n) => n.method === 'notifications/tools/list_changed'), 'tools/list_changed on stdio', 10_000);
      expect((await b.client.listTools()).tools.map((t) => t.name)).toContain('claim');
      const todo = await push(api, e, { title: 'after the cold start', queue: 'reviews' });
      await until(() => channel(b).some((n) => n.params.meta.todo_id === todo.id), 'the doorbell');
    } finally {
      relay.to(portOf(app));
    }
  }, 40_000);

  it('ends its session and exits 0 when stdin closes', async () => {
    const e = await vend(api, { name: 'closing', queues: ['reviews'] });
    const b = await bridge(e);
    const t0 = Date.now();
    b.child.stdin!.end();
    expect(await b.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - t0).toBeLessThan(2_000);
    await until(() => !app.services.sessions.all().some((s) => s.endpoint.id === e.id), 'the session to end');
  });
});

/** Runs the CLI with `env` and stdin closed at once; its exit code and output. */
function run(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [SWITCHBOARD_BIN, ...args], { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d));
    child.stderr.on('data', (d: Buffer) => (stderr += d));
    child.stdin.end();
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('switchboard bridge refuses a bad start', { timeout: 45_000 }, () => {
  it('exits 2 naming SWITCHBOARD_AGENT_TOKEN when it is not set, writing nothing to stdout', async () => {
    const r = await run(['bridge', '--url', 'http://127.0.0.1:9/mcp/x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/SWITCHBOARD_AGENT_TOKEN is not set/);
    expect(r.stdout).toBe('');
  });

  it('refuses a credential on the command line without echoing it', async () => {
    const secret = 'sbk_notreallyasecretbutlookslikeone';
    const runs = [
      ['bridge', '--url', 'http://127.0.0.1:9/mcp/x', secret],
      ['bridge', '--url', 'http://127.0.0.1:9/mcp/x', '--token', secret],
      ['bridge', '--url', `http://127.0.0.1:9/mcp/x?token=${secret}`],
    ];
    const results = await Promise.all(runs.map((args) => run(args, { SWITCHBOARD_AGENT_TOKEN: 'sbk_fromtheenvironment' })));
    results.forEach((r, i) => {
      expect(r.code, runs[i]!.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/SWITCHBOARD_AGENT_TOKEN/);
      expect(r.stderr).not.toContain(secret);
      expect(r.stdout).toBe('');
    });
  });

  it('exits 2 on a personal token, an unexpanded ${SWITCHBOARD_AGENT_TOKEN}, a missing --url or a URL that is not http(s)', async () => {
    const [personal, noUrl, ftp, unexpanded] = await Promise.all([
      run(['bridge', '--url', 'http://127.0.0.1:9/mcp/x'], { SWITCHBOARD_AGENT_TOKEN: 'sbp_personal' }),
      run(['bridge'], { SWITCHBOARD_AGENT_TOKEN: 'sbk_x' }),
      run(['bridge', '--url', 'ftp://127.0.0.1/mcp/x'], { SWITCHBOARD_AGENT_TOKEN: 'sbk_x' }),
      run(['bridge', '--url', 'http://127.0.0.1:9/mcp/x'], { SWITCHBOARD_AGENT_TOKEN: '${SWITCHBOARD_AGENT_TOKEN}' }),
    ]);
    expect(unexpanded.code).toBe(2);
    expect(unexpanded.stderr).toMatch(/unexpanded text \$\{SWITCHBOARD_AGENT_TOKEN\}: export SWITCHBOARD_AGENT_TOKEN/);
    expect(personal.code).toBe(2);
    expect(personal.stderr).toMatch(/personal token \(sbp_\.\.\.\)/);
    expect(noUrl.code).toBe(2);
    expect(noUrl.stderr).toMatch(/--url/);
    expect(ftp.code).toBe(2);
    expect(ftp.stderr).toMatch(/http/);
  });

  it('--help names the environment variable, the Claude Code flag and a .mcp.json entry', async () => {
    const r = await run(['bridge', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('SWITCHBOARD_AGENT_TOKEN');
    expect(r.stdout).toContain('--dangerously-load-development-channels server:switchboard');
    expect(r.stdout).toContain(`"command":"node",\n    "args":[${JSON.stringify(SWITCHBOARD_BIN)},"bridge","--url","<mcp_url>"],`);
    expect(r.stdout).toContain('"env":{"SWITCHBOARD_AGENT_TOKEN":"${SWITCHBOARD_AGENT_TOKEN}"}');
  });
});
