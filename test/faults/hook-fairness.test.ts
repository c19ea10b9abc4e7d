import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/lib/clock.ts';
import { until } from '../support/agents.ts';
import { apiCaller, humanWithToken, migratedDatabase, push, startTestApp, vend, type TestApp, type TestDb, type Vended } from '../support/fixtures.ts';

/**
 * Fault: one tenant's notify hooks are slow or refuse, and another tenant's must still arrive
 * promptly. Tenant A has seven endpoints with five hooks each: six endpoints' receiver accepts the
 * connection and never answers (each attempt runs into the 5 s timeout), the seventh's port
 * refuses. Thirty hanging hooks are far more than the 8 workers: only the failing share (half) may
 * hold them.
 * A pushes a storm of todos; tenant B's single hook points at a fast receiver. B's delay from push
 * to receipt is measured alone first (the baseline), then while A's storm is going. Production
 * delivery settings: 8 workers, 3 attempts ~1 s and ~5 s apart, 5 s per attempt.
 */

const HOOK_ENV = { SWITCHBOARD_PUSH_ALLOW_HTTP: '1', SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '127.0.0.1/32' };
const STORM_TODOS = 10;
/** Tenant A's endpoints whose five hooks each call the hanging receiver. */
const SLOW_ENDPOINTS = 6;
const SAMPLES = 6;

const clock = new ManualClock('2026-09-21T08:00:00Z');
let db: TestDb;
let app: TestApp;
let slow: Server;
let fast: Server;
const hanging: ServerResponse[] = [];
let slowHits = 0;
/** When each todo id reached B's receiver (performance.now()). */
const arrivals = new Map<string, number>();

function listen(server: Server): Promise<number> {
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port)));
}

/** A loopback port nothing listens on: connections to it are refused. */
async function refusingPort(): Promise<number> {
  const s = createServer();
  const port = await listen(s);
  await new Promise((r) => s.close(r));
  return port;
}

let api: ReturnType<typeof apiCaller>;
/** Each write first moves the clock on 4 s so the API's write limit never bites. */
const write = (method: string, path: string, body?: unknown) => {
  if (method !== 'GET') clock.advance(4000);
  return api(method, path, body);
};

beforeAll(async () => {
  slow = createServer((req, res) => {
    slowHits++;
    req.resume();
    hanging.push(res);
  });
  fast = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { todo_id?: string };
      if (body.todo_id) arrivals.set(body.todo_id, performance.now());
      res.end('{"ok":true}');
    });
  });
  await Promise.all([listen(slow), listen(fast)]);
  db = await migratedDatabase();
  app = await startTestApp(db.url, clock, { env: HOOK_ENV });
  const owner = await humanWithToken(db.sql);
  api = apiCaller(app.url, owner.token);
});

afterAll(async () => {
  for (const res of hanging) res.destroy();
  await app?.stop();
  for (const s of [slow, fast]) {
    s?.closeAllConnections();
    await new Promise((r) => s?.close(r));
  }
  await db?.drop();
});

async function hook(e: Vended, url: string): Promise<void> {
  const r = await write('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url });
  expect(r.status, r.text).toBe(201);
}

/** Push → received on B's fast receiver, in ms, one todo at a time. */
async function delays(b: Vended, label: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    const { id } = await push(write, b, { title: `${label} ${i}`, queue: 'reviews' });
    await until(() => arrivals.has(id), `B's notification ${label} ${i}`, 15_000);
    out.push(arrivals.get(id)! - started);
    await new Promise((r) => setTimeout(r, 200));
  }
  return out;
}

const fmt = (xs: number[]) => `median ${Math.round([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!)} ms, max ${Math.round(Math.max(...xs))} ms`;

describe('notify hook fairness', () => {
  it("a slow and a refusing tenant's hook storm delays another tenant's hook by under 5 s", async () => {
    const slowUrl = `http://127.0.0.1:${(slow.address() as { port: number }).port}/hook`;
    const refusedUrl = `http://127.0.0.1:${await refusingPort()}/hook`;
    const fastUrl = `http://127.0.0.1:${(fast.address() as { port: number }).port}/hook`;

    const b = await vend(write, { name: 'tenant-b', queues: ['reviews'] });
    await hook(b, fastUrl);
    const warm = await push(write, b, { title: 'warm-up', queue: 'reviews' });
    await until(() => arrivals.has(warm.id), "B's warm-up notification");
    const baseline = await delays(b, 'alone');

    const slowOnes: Vended[] = [];
    for (let i = 0; i < SLOW_ENDPOINTS; i++) slowOnes.push(await vend(write, { name: `tenant-a-slow-${i}`, queues: ['reviews'] }));
    const aRefused = await vend(write, { name: 'tenant-a-refused', queues: ['reviews'] });
    for (let i = 0; i < 5; i++) {
      for (const a of slowOnes) await hook(a, slowUrl);
      await hook(aRefused, refusedUrl);
    }
    for (let i = 0; i < STORM_TODOS; i++) {
      for (const a of [...slowOnes, aRefused]) await push(write, a, { title: `storm ${i}`, queue: 'reviews' });
    }
    // Let the storm establish itself: every slow hook has had its first attempt time out.
    await until(() => slowHits >= SLOW_ENDPOINTS * 5, 'the slow receiver to be called by every slow hook', 30_000);
    await new Promise((r) => setTimeout(r, 5500));
    const stormed = await delays(b, 'storm');

    console.log(
      `[faults] notify hook fairness: tenant B alone ${fmt(baseline)}; during tenant A's storm (${SLOW_ENDPOINTS * 5 + 5} hooks, ` +
        `${STORM_TODOS * (SLOW_ENDPOINTS * 5 + 5)} deliveries to a hanging and a refusing receiver; hanging receiver called ${slowHits} times) ${fmt(stormed)}`,
    );
    expect(Math.max(...stormed)).toBeLessThan(5000);
  });
});
