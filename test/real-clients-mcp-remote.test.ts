import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/lib/clock.ts';
import { until, type Notification } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, push, startTestApp, vend, type Api, type TestApp, type TestDb, type Vended } from './support/fixtures.ts';
import { toolOrSkip } from './support/test-tools.ts';

// Issue 36: mcp-remote 0.15.1 (npm) in front of an agent. Each run opens two MCP sessions: the
// agent's, and a probe ("mcp-remote-fallback-test", its http-first transport check) that holds an
// open GET stream for the whole run and forwards nothing. Every doorbell must reach the agent's
// session, and the self-test must pass through it. The agent is the MCP SDK's Client over stdio,
// with mcp-remote as its stdio server, in front of the app over real HTTP.

const MCP_REMOTE_VERSION = '0.15.1';
const mcpRemoteDir = await toolOrSkip('real-clients-mcp-remote', 'mcp-remote', MCP_REMOTE_VERSION);

/**
 * The app's clock moves in real time, as in production, and jumps when told. mcp-remote opens its
 * probe's stream some milliseconds before the agent's; a frozen clock would give both the same
 * attach time, a tie no real server sees, and "newest stream" would then hang on the order of ids.
 */
class RunningClock extends ManualClock {
  readonly #origin = performance.now();
  override now(): Date {
    return new Date(super.now().getTime() + Math.floor(performance.now() - this.#origin));
  }
}

const PUSHES = 20;
/** How long each push waits for its doorbell before the next (a lost one costs this). */
const DOORBELL_WAIT_MS = 2_000;
const RING_DELAY_MS = 200;

let db: TestDb;
let app: TestApp;
let api: Api;
let home: string;
const clients: Client[] = [];

beforeAll(async () => {
  if (!mcpRemoteDir) return;
  db = await migratedDatabase();
  app = await startTestApp(db.url, new RunningClock('2026-09-22T08:00:00Z'), { selfTestRingDelayMs: RING_DELAY_MS });
  api = apiCaller(app.url, (await humanWithToken(db.sql)).token);
  home = await mkdtemp(join(tmpdir(), 'sb-mcp-remote-'));
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
});
afterAll(async () => {
  await app?.stop();
  await db?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

interface Proxied {
  client: Client;
  heard: Notification[];
  /** What mcp-remote wrote to stderr (its log), for failure messages. */
  stderr: () => string;
  call: (name: string, args?: Record<string, unknown>) => Promise<any>;
}

/** The agent: an SDK Client whose stdio server is `node mcp-remote/dist/proxy.js <mcp_url>`, the credential in its env. */
async function agentBehindMcpRemote(e: Vended): Promise<Proxied> {
  const heard: Notification[] = [];
  let stderr = '';
  const client = new Client({ name: 'agent', version: '1.0.0' });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [join(mcpRemoteDir!, 'dist', 'proxy.js'), e.mcp_url, '--allow-http', '--header', 'Authorization: Bearer ${SWITCHBOARD_AGENT_TOKEN}'],
    // A throwaway HOME and config dir: mcp-remote writes nothing into the real home.
    env: { PATH: process.env.PATH ?? '', HOME: home, MCP_REMOTE_CONFIG_DIR: join(home, '.mcp-auth'), SWITCHBOARD_AGENT_TOKEN: e.token },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (d: Buffer) => void (stderr += d.toString()));
  const self: Proxied = {
    client,
    heard,
    stderr: () => stderr.slice(-1500),
    call: async (name, args = {}) => {
      const r = (await client.callTool({ name, arguments: args })) as { content: { text: string }[]; isError?: boolean };
      return r.isError ? { error: r.content[0]!.text } : JSON.parse(r.content[0]!.text);
    },
  };
  client.fallbackNotificationHandler = async (n) => {
    if (n.method !== 'notifications/claude/channel') return;
    heard.push(n as unknown as Notification);
  };
  await client.connect(transport);
  clients.push(client);
  return self;
}

/** Acts on a doorbell as an agent does: claim the todo it names by id, then complete it (a self-test claim completes itself). */
async function work(agent: Proxied, todoId: string): Promise<void> {
  const claimed = await agent.call('claim', { id: todoId });
  if (claimed.error) throw new Error(`claim ${todoId}: ${claimed.error}`);
  if (claimed.state === 'done') return;
  const done = await agent.call('complete', { id: todoId, result: { ok: true } });
  if (done.error) throw new Error(`complete ${todoId}: ${done.error}`);
}

describe.skipIf(!mcpRemoteDir)(`mcp-remote ${MCP_REMOTE_VERSION} in front of an agent`, () => {
  it(`delivers all ${PUSHES} doorbells to the agent, not to mcp-remote's probe session, and the self-test passes`, async () => {
    const e = await vend(api, { name: 'behind-mcp-remote', queues: ['reviews'] });
    const agent = await agentBehindMcpRemote(e);

    // The run's two sessions, both streaming: the agent's and the probe.
    await until(async () => (await app.services.directory.sessionsOf(e.id)).filter((s) => s.stream_instance !== null).length === 2, 'both streams of the run', 15_000);
    const sessions = await app.services.directory.sessionsOf(e.id);
    expect(sessions.map((s) => s.client_name).sort()).toEqual([`agent (via mcp-remote ${MCP_REMOTE_VERSION})`, 'mcp-remote-fallback-test']);
    const mine = sessions.find((s) => s.client_name.startsWith('agent '))!.id;
    expect((await agent.client.listTools()).tools.map((t) => t.name)).toContain('claim');

    const pushed: string[] = [];
    for (let i = 0; i < PUSHES; i++) {
      const { id } = await push(api, e, { title: `review ${i + 1}` });
      pushed.push(id);
      const rang = await until(() => agent.heard.some((n) => n.params.meta.todo_id === id), `doorbell ${i + 1}`, DOORBELL_WAIT_MS).then(
        () => true,
        () => false,
      );
      if (rang) await work(agent, id);
      // The agent spends a second on each todo (the clock-driven rate limits refill).
      app.clock.advance(1_000);
    }
    // A late doorbell still counts; a lost one never comes.
    await until(() => pushed.every((id) => agent.heard.some((n) => n.params.meta.todo_id === id)), 'every doorbell', DOORBELL_WAIT_MS).catch(() => undefined);

    // (select *: the ring's reason is a column of its own since migration 0022.)
    const rings = await db.sql<{ todo_id: string; session_id: string; reason?: string | null }[]>`
      select * from doorbell_rings where endpoint_id = ${e.id} and kind = 'todo' order by sent_at`;
    const heardIds = agent.heard.filter((n) => n.params.meta.todo_id).map((n) => n.params.meta.todo_id);
    const lost = rings.filter((r) => r.session_id !== mine).length;
    expect(heardIds, `${heardIds.length} of ${PUSHES} doorbells heard; ${lost} rang the probe session. mcp-remote:\n${agent.stderr()}`).toEqual(pushed);
    expect(rings.map((r) => r.session_id)).toEqual(pushed.map(() => mine));
    // Every ring record says why its session was chosen: the first, the newest stream of a session
    // that has used its tools (the probe never has); after the agent's first claim, its acknowledgement.
    expect(rings.map((r) => r.reason)).toEqual(pushed.map((_, i) => (i === 0 ? 'newest_stream' : 'acknowledged_last')));
    // The agent acted on each: every todo is done.
    const states = await db.sql<{ id: string; state: string }[]>`select id, state from todos where id = any(${pushed})`;
    expect(states.filter((t) => t.state !== 'done').map((t) => t.id)).toEqual([]);

    // The self-test through the API, as `switchboard doctor REF` starts it: the test doorbell
    // reaches the agent, which claims the todo it names.
    const started = await api('POST', `/api/v1/endpoints/${e.slug}/doorbell-tests`, { wait_seconds: 30 });
    expect(started.status, started.text).toBe(201);
    const testPath = `/api/v1/endpoints/${e.slug}/doorbell-tests/${started.json.test_id}`;
    const report = async () => (await api('GET', testPath)).json;
    const testRang = await until(() => agent.heard.some((n) => n.params.meta.kind === 'self_test'), 'the test doorbell', 5_000).then(
      () => true,
      () => false,
    );
    if (testRang) await work(agent, agent.heard.find((n) => n.params.meta.kind === 'self_test')!.params.meta.todo_id!);
    // Unheard, its wait runs out: move past report_after so the verdict is final either way.
    else app.clock.advance(31_000 + RING_DELAY_MS);
    const verdict = await report();
    expect(verdict, `the test doorbell went to ${verdict.delivered?.session_id === mine ? 'the agent' : 'the probe'}`).toMatchObject({
      verdict: 'pass',
      delivered: { written: true, session_id: mine },
    });
    expect(agent.heard.filter((n) => n.params.meta.kind === 'self_test').map((n) => n.params.meta.todo_id)).toEqual([started.json.todo_id]);
  }, 120_000);
});
