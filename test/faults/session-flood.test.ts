import { spawn } from 'node:child_process';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayCluster, type RunningCluster } from '../support/throwaway-cluster.ts';
import { connect, type Sql } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';
import { apiCaller, humanWithToken } from '../support/app.ts';
import { vend } from '../support/fixtures.ts';
import { spawnServe, stopAllServes, type ServeProcess } from '../support/processes.ts';

/**
 * Fault (issue 17, item 2): one agent credential tries to open 50,000 MCP sessions, from 250
 * loopback addresses so the per-address limit does not stop it first. At most the per-endpoint
 * cap of sessions is live afterwards, another tenant's tool calls keep their latency meanwhile
 * (p90 within 100 ms of its baseline's p99 from the same run, none over a second; the scan this
 * guards against blocked the event loop for seconds), and the server shuts down in under 5 s.
 */

const ATTEMPTS = 50_000;
const ADDRESSES = 250;
const CONCURRENCY = 64;
const CAP = 32;

let cluster: RunningCluster;
let sql: Sql;
let serve: ServeProcess;

beforeAll(async () => {
  cluster = await startThrowawayCluster({ prefer: 'system' });
  sql = connect(cluster.url, { max: 3 });
  await migrate(sql);
  serve = await spawnServe({ databaseUrl: cluster.url, logLevel: 'warn' });
});

afterAll(async () => {
  await stopAllServes();
  await sql?.end({ timeout: 5 });
  await cluster?.stop();
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function post(url: string, agent: http.Agent, headers: Record<string, string>, body: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** A child process calling tools/list every 100 ms on one session until stopped (two warm-up calls first); its latencies land in `out`. */
function probeInChild(url: string, token: string, sid: string, out: number[]) {
  const script = `
    const http = require('node:http');
    const agent = new http.Agent({ keepAlive: true, localAddress: '127.0.9.2' });
    const body = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const headers = { authorization: 'Bearer ' + process.env.T, 'mcp-session-id': process.env.S, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    let stop = false; process.stdin.on('end', () => (stop = true)); process.stdin.resume();
    const one = () => new Promise((resolve) => { const t0 = performance.now();
      const req = http.request(process.env.U, { method: 'POST', agent, headers }, (res) => { res.resume(); res.on('end', () => resolve(res.statusCode === 200 ? performance.now() - t0 : -1)); });
      req.on('error', () => resolve(-1)); req.end(body); });
    (async () => { await one(); await one(); while (!stop) { process.stdout.write(String(await one()) + '\\n'); await new Promise((r) => setTimeout(r, 100)); } process.exit(0); })();`;
  const child = spawn(process.execPath, ['-e', script], { env: { PATH: process.env.PATH, U: url, T: token, S: sid }, stdio: ['pipe', 'pipe', 'inherit'] });
  let buf = '';
  child.stdout!.on('data', (c: Buffer) => {
    buf += c.toString();
    const lines = buf.split('\n');
    buf = lines.pop()!;
    for (const l of lines) if (l.trim()) out.push(Number(l));
  });
  const exited = new Promise((r) => child.once('exit', r));
  return {
    stop: async () => {
      child.stdin!.end();
      await exited;
    },
  };
}

const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'flood', version: '1' } } };
const pct = (s: number[], p: number) => [...s].sort((a, b) => a - b)[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;

describe('one credential floods initialize', () => {
  it('leaves at most the cap live, another tenant keeps its latency, and shutdown is prompt', async () => {
    const human = await humanWithToken(sql);
    const api = apiCaller(serve.url, human.token);
    const attacker = await vend(api, { name: 'flooder', queues: ['jobs'] });
    const other = await vend(api, { name: 'bystander', queues: ['jobs'] });

    // The bystander: one session, from its own address, a tools/list every 100 ms (under its endpoint's 20/s).
    const calm = new http.Agent({ keepAlive: true, localAddress: '127.0.9.1' });
    const auth = (e: { token: string }) => ({ authorization: `Bearer ${e.token}` });
    const opened = await post(other.mcp_url, calm, auth(other), initialize);
    expect(opened.status, opened.body).toBe(200);
    const sid = opened.headers['mcp-session-id'] as string;
    const probe = async () => {
      const t0 = performance.now();
      const r = await post(other.mcp_url, calm, { ...auth(other), 'mcp-session-id': sid }, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
      expect(r.status).toBe(200);
      return performance.now() - t0;
    };
    const baseline: number[] = [];
    for (let i = 0; i < 60; i++) {
      baseline.push(await probe());
      await new Promise((r) => setTimeout(r, 100));
    }

    const agents = Array.from({ length: ADDRESSES }, (_, i) => new http.Agent({ keepAlive: true, localAddress: `127.0.${10 + Math.floor(i / 200)}.${(i % 200) + 1}` }));
    const statuses = new Map<number, number>();
    let sent = 0;
    const during: number[] = [];
    // The bystander's calls during the flood come from a process of their own, so the flood's
    // client load in this process does not count as server latency.
    const prober = probeInChild(other.mcp_url, other.token, sid, during);
    const started = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async (_, w) => {
        while (sent < ATTEMPTS) {
          const n = sent++;
          const r = await post(attacker.mcp_url, agents[(n + w) % ADDRESSES]!, auth(attacker), initialize);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        }
      }),
    );
    const floodSeconds = (performance.now() - started) / 1000;
    await prober.stop();

    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from mcp_sessions s join endpoints e on e.id = s.endpoint_id where e.slug = ${attacker.slug}`;
    expect(row!.n).toBeLessThanOrEqual(CAP);
    expect(statuses.get(200) ?? 0).toBeGreaterThan(CAP); // the cap was reached and enforced, not just never hit
    const stopStarted = performance.now();
    await serve.stop();
    const stopMs = performance.now() - stopStarted;
    for (const a of [...agents, calm]) a.destroy();

    const summary = [...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${n}× ${s}`).join(', ');
    console.log(
      `[faults] session flood: ${ATTEMPTS} initializes in ${floodSeconds.toFixed(1)} s from ${ADDRESSES} addresses (${summary}); ` +
        `${row!.n} sessions live (cap ${CAP}); bystander tools/list p50/p99 ${pct(baseline, 50).toFixed(1)}/${pct(baseline, 99).toFixed(1)} ms alone, ` +
        `p50/p90/max ${pct(during, 50).toFixed(1)}/${pct(during, 90).toFixed(1)}/${Math.max(...during).toFixed(1)} ms during the flood (${during.length} calls); shutdown ${Math.round(stopMs)} ms`,
    );
    expect(during.length).toBeGreaterThan(20);
    expect(during.filter((ms) => ms < 0)).toEqual([]); // every call answered 200
    // Relative to the same run's baseline: on a shared two-CPU machine an absolute bound fails on
    // noise. The fault this guards against (a scan of every session per call) slowed every call by
    // seconds, so most calls are held near the baseline and none may wait a second. The p99 of
    // 78 calls is their single worst, which one scheduler hiccup decides (185.8 ms once in CI).
    expect(pct(during, 90)).toBeLessThan(pct(baseline, 99) + 100);
    expect(Math.max(...during)).toBeLessThan(1000);
    expect(stopMs).toBeLessThan(5000);
  }, 240_000);
});
