import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maintenanceLoopsOf } from '../src/compose.ts';
import { ManualClock } from '../src/lib/clock.ts';
import { connectAgent, until } from './support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, push, startTestApp, vend, type Api, type TestApp, type TestDb } from './support/fixtures.ts';
import { SWITCHBOARD_BIN } from './support/processes.ts';
import { toolOrSkip } from './support/test-tools.ts';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';

// Issue 36: the MCP Inspector CLI leaves a session per call. Each `--cli ... --method tools/list`
// initializes, opens its GET stream, lists the tools and exits without a DELETE, so its session
// stays in the directory with no stream. Sessions with no stream and no call for
// SWITCHBOARD_SESSION_IDLE (5 minutes) end, and `switchboard doctor` counts only live ones: after
// ten Inspector calls beside one connected agent, the endpoint has exactly one session.
//
// @modelcontextprotocol/inspector 0.16 to 1.0.x declare engines node >=22.7.5, but 1.0.3's --cli
// runs on Node 20 (npm only warns, EBADENGINE) and sends headers (--header); 0.15 cannot.

const INSPECTOR_VERSION = '1.0.3';
const inspectorDir = await toolOrSkip('real-clients-inspector', '@modelcontextprotocol/inspector', INSPECTOR_VERSION);

const CALLS = 10;
const IDLE_MS = 5 * 60_000;

let db: TestDb;
let app: TestApp;
let api: Api;
let humanToken: string;
let home: string;
const clients: Client[] = [];

beforeAll(async () => {
  if (!inspectorDir) return;
  db = await migratedDatabase();
  app = await startTestApp(db.url, new ManualClock('2026-09-22T08:00:00Z'), { selfTestRingDelayMs: 200 });
  humanToken = (await humanWithToken(db.sql)).token;
  api = apiCaller(app.url, humanToken);
  home = await mkdtemp(join(tmpdir(), 'sb-inspector-'));
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => {})));
  await app?.stop();
  await db?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** A child process with a throwaway HOME; never throws (the caller reads the exit code). */
function run(file: string, args: string[], env: Record<string, string>, timeoutMs: number): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { env: { PATH: process.env.PATH ?? '', HOME: home, ...env }, timeout: timeoutMs, maxBuffer: 8 * 1024 * 1024 }, (err, out, errOut) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, out, err: `${errOut}${err && typeof err.code !== 'number' ? err.message : ''}` }),
    );
  });
}

/** `npx @modelcontextprotocol/inspector --cli <url> --transport http --method tools/list --header "Authorization: Bearer ..."`. */
const inspectorToolsList = (mcpUrl: string, token: string) =>
  run(
    process.execPath,
    [join(inspectorDir!, 'cli', 'build', 'cli.js'), '--cli', mcpUrl, '--transport', 'http', '--method', 'tools/list', '--header', `Authorization: Bearer ${token}`],
    {},
    30_000,
  );

/** The janitor's own tick, as its loop runs it every minute. */
const janitorTick = () => maintenanceLoopsOf(app.services).find((l) => l.name === 'session-janitor')!.tick();

describe.skipIf(!inspectorDir)(`MCP Inspector ${INSPECTOR_VERSION} --cli beside a connected agent`, () => {
  it(`${CALLS} tools/list calls leave no session once idle: doctor lists exactly the agent's`, async () => {
    const e = await vend(api, { name: 'inspected', queues: ['reviews'] });
    const agent = await connectAgent(app, e, { track: clients });

    for (let i = 0; i < CALLS; i += 2) {
      // A person runs them a few seconds apart (the clock-driven rate limits refill).
      app.clock.advance(2_000);
      const runs = await Promise.all([inspectorToolsList(e.mcp_url, e.token), inspectorToolsList(e.mcp_url, e.token)]);
      for (const r of runs) {
        expect(r.code, r.err).toBe(0);
        expect((JSON.parse(r.out) as { tools: { name: string }[] }).tools.map((t) => t.name)).toContain('claim');
      }
    }

    // Each call left its session behind (no DELETE), its stream closed with the process.
    const left = (await app.services.directory.sessionsOf(e.id)).filter((s) => s.id !== agent.sessionId);
    expect(left.map((s) => [s.client_name, s.client_version, s.stream_instance])).toEqual(Array.from({ length: CALLS }, () => ['inspector', INSPECTOR_VERSION, null]));
    // Used a moment ago, they are live: the agent's and the ten.
    expect((await api('GET', `/api/v1/endpoints/${e.slug}`)).json).toMatchObject({ sessions: CALLS + 1 });

    // The idle time passes (the agent keeps its stream open) and the janitor runs.
    app.clock.advance(IDLE_MS + 1_000);
    await janitorTick();
    const remaining = (await db.sql<{ id: string }[]>`select id from mcp_sessions where endpoint_id = ${e.id}`).map((r) => r.id);
    expect(remaining, `${remaining.length} sessions left after the idle time and the janitor's tick`).toEqual([agent.sessionId]);

    // `switchboard doctor REF --json`, a CLI process against the app: one session, and it is the
    // one that hears (the agent claims the test todo its doorbell names).
    const doctor = run(process.execPath, [SWITCHBOARD_BIN, 'doctor', e.slug, '--json', '--wait', '30s'], { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: humanToken }, 60_000);
    await until(() => agent.tests().length === 1, 'the test doorbell', 30_000);
    expect(await agent.call('claim', { id: agent.tests()[0]!.params.meta.todo_id })).toMatchObject({ state: 'done', self_test: true });
    const r = await doctor;
    expect(r.code, `${r.out}\n${r.err}`).toBe(0);
    const report = JSON.parse(r.out) as { endpoints: { slug: string; sessions: number; unheard_sessions: number }[]; test: { verdict: string }; failed: string[] };
    expect(report.endpoints.find((x) => x.slug === e.slug)).toMatchObject({ sessions: 1, unheard_sessions: 0 });
    expect(report.test.verdict).toBe('pass');
    expect(report.failed).toEqual([]);

    // And the agent still hears its doorbells.
    const { id } = await push(api, e, { title: 'after the clean-up' });
    await until(() => agent.heard.some((n) => n.params.meta.todo_id === id), 'the doorbell after the clean-up');
  }, 120_000);
});
