import { randomBytes } from 'node:crypto';
import { connect as netConnect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Sql } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';
import { DOORBELL_BUFFER } from '../../src/services/doorbell/doorbell.ts';
import { createToken } from '../../src/store/humans.ts';
import { humanWithToken } from '../support/app.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { apiCaller, vend as vendVia } from '../support/fixtures.ts';
import { connectRemoteAgent, sleep, spawnServe, stopAllServes, waitFor, type RemoteAgent, type ServeProcess } from '../support/processes.ts';

/**
 * Fault: a slow consumer. A raw client opens its session's GET stream and then never reads again
 * (a node:net socket that stops reading once the response headers are in). Waves of todos ring
 * it until the kernel's socket buffers are full; from then on the server may hold at most
 * DOORBELL_BUFFER unflushed frames for the session and must drop every further doorbell rather
 * than buffer it. The serve process's memory must stay flat, and an SDK agent of another endpoint
 * must keep hearing its own doorbells promptly throughout.
 */

const METRICS_TOKEN = randomBytes(32).toString('hex');
const WAVE = 500;
/** Enough for a kernel that buffers ~13 MiB per socket (Debian's tcp_wmem allows 4 MiB). */
const MAX_WAVES = 24;
const DROP_ONLY_WAVES = 3;
const HEALTHY_PER_WAVE = 5;

let db: TestDatabase;
let sql: Sql;
let serve: ServeProcess;
let slowSocket: Socket | undefined;
let healthy: RemoteAgent | undefined;

beforeAll(async () => {
  db = await createTestDatabase();
  sql = connect(db.url, { max: 3 });
  await migrate(sql);
  serve = await spawnServe({ databaseUrl: db.url, env: { SWITCHBOARD_METRICS_TOKEN: METRICS_TOKEN } });
});

afterAll(async () => {
  slowSocket?.destroy();
  await healthy?.close();
  await stopAllServes();
  await sql?.end({ timeout: 5 });
  await db?.drop();
});

/** The serve process's own view of its memory, from /metrics. */
async function memory(): Promise<{ rss: number; heap: number }> {
  const text = await (await fetch(`${serve.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)![1]);
  return { rss: value('switchboard_process_resident_memory_bytes'), heap: value('switchboard_nodejs_heap_size_used_bytes') };
}

const MiB = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

/**
 * Opens an MCP session with plain HTTP, then its GET stream on a raw socket that reads the
 * response headers and nothing after them.
 */
async function slowConsumer(slug: string, token: string): Promise<{ sessionId: string; socket: Socket }> {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await fetch(`${serve.url}/mcp/${slug}`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'slow-reader', version: '0' } } }),
  });
  expect(init.status).toBe(200);
  const sessionId = init.headers.get('mcp-session-id')!;
  const initialized = await fetch(`${serve.url}/mcp/${slug}`, {
    method: 'POST',
    headers: { ...headers, 'mcp-session-id': sessionId },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  expect(initialized.status).toBe(202);

  const socket = netConnect(serve.port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  socket.write(
    `GET /mcp/${slug} HTTP/1.1\r\nHost: 127.0.0.1:${serve.port}\r\nAuthorization: Bearer ${token}\r\n` +
      `Accept: text/event-stream\r\nMcp-Session-Id: ${sessionId}\r\n\r\n`,
  );
  let head = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      socket.off('data', onData);
      socket.pause(); // and never resumed: the kernel buffers fill, then the server's
      resolve();
    };
    socket.on('data', onData).once('error', reject);
  });
  expect(head).toMatch(/^HTTP\/1\.1 200 /);
  expect(head.toLowerCase()).toContain('content-type: text/event-stream');
  return { sessionId, socket };
}

describe('a slow consumer that opens a stream and never reads', () => {
  it('gets at most its buffer of doorbells once its socket is full, while memory stays flat and other sessions hear theirs promptly', async () => {
    const human = await humanWithToken(sql);
    const vend = (name: string) => vendVia(apiCaller(serve.url, human.token), { name, queues: ['work'] });
    const slow = await vend('slow');
    const fine = await vend('fine');
    // The write limit is 5/s (burst 20) per token: a wave spreads over many tokens.
    const tokens = await Promise.all(Array.from({ length: 80 }, () => createToken(sql, { handle: human.handle }).then((t) => t.token)));
    let nextToken = 0;
    const push = async (slug: string, title: string): Promise<string> => {
      for (;;) {
        const r = await fetch(`${serve.url}/api/v1/endpoints/${slug}/todos`, {
          method: 'POST',
          headers: { authorization: `Bearer ${tokens[nextToken++ % tokens.length]}`, 'content-type': 'application/json' },
          body: JSON.stringify({ title }),
        });
        if (r.status === 429) {
          await sleep(200);
          continue;
        }
        expect(r.status).toBe(201);
        return ((await r.json()) as { id: string }).id;
      }
    };

    healthy = await connectRemoteAgent(fine.mcp_url, fine.token, serve.url);
    const consumer = await slowConsumer(slow.slug, slow.token);
    slowSocket = consumer.socket;
    const written = async () => Number((await sql`select count(*)::int as n from doorbell_rings where session_id = ${consumer.sessionId}`)[0]!.n);

    // Warm up (JIT, pools), then take the baseline.
    for (let i = 0; i < 10; i++) await push(fine.slug, `warm-up ${i}`);
    await waitFor(() => healthy!.heard.length >= 10, 'the warm-up doorbells');
    const baseline = await memory();

    // Waves of doorbells at the slow session, with a few for the healthy agent in each, until a
    // whole wave goes by with not one more doorbell written to the slow session.
    const title = 'x'.repeat(190); // ~1 KiB frames
    const latencies: number[] = [];
    const waves: { pushed: number; written: number; rss: number; heap: number }[] = [];
    let pushed = 0;
    for (let w = 0; w < MAX_WAVES; w++) {
      const jobs = Array.from({ length: WAVE }, (_, i) => i);
      const workers = Array.from({ length: 16 }, async () => {
        for (let i = jobs.shift(); i !== undefined; i = jobs.shift()) {
          await push(slow.slug, `${title} ${w}.${i}`);
          pushed++;
          if (i % (WAVE / HEALTHY_PER_WAVE) === 0) {
            const at = Date.now();
            const id = await push(fine.slug, `healthy ${w}.${i}`);
            void waitFor(() => healthy!.heard.find((n) => n.params.meta.todo_id === id), `healthy doorbell ${id}`, 10_000, 5).then(
              (n) => latencies.push(n.at - at),
              () => latencies.push(Infinity),
            );
          }
        }
      });
      await Promise.all(workers);
      await sleep(300); // ring records are written after the doorbell, asynchronously
      const mem = await memory();
      waves.push({ pushed, written: await written(), ...mem });
      // Done after DROP_ONLY_WAVES waves in a row that wrote nothing more to the slow session.
      if (waves.filter((x) => x.written === waves.at(-1)!.written).length > DROP_ONLY_WAVES) break;
    }
    await waitFor(() => latencies.length === waves.length * HEALTHY_PER_WAVE, 'every healthy doorbell to be timed', 15_000);

    const final = waves.at(-1)!;
    const bound = waves.findIndex((w) => w.written === final.written);
    // The buffer bound kicked in: once the kernel's socket buffers were full, every further
    // doorbell was dropped (three whole waves added not one frame), and each drop was logged.
    expect(bound, `no wave was dropped whole: ${waves.map((w) => w.written).join(' → ')}`).toBeGreaterThan(0);
    expect(waves.length - bound).toBe(DROP_ONLY_WAVES + 1);
    expect(final.written).toBeLessThan(final.pushed);
    // Rings follow their push asynchronously (the cluster's ring gate): count both once all have landed.
    const droppedNow = () =>
      serve.output().split('\n').filter((l) => l.includes('"doorbell dropped"') && l.includes('"cause":"all_full"') && l.includes(`"slug":"${slow.slug}"`)).length;
    await waitFor(async () => droppedNow() + (await written()) >= final.pushed, 'every ring attempt at the slow session to land', 15_000);
    await sleep(300);
    const dropped = droppedNow();
    expect(dropped).toBe(final.pushed - (await written()));

    // The healthy agent heard every one of its doorbells, promptly.
    expect(latencies.filter((l) => !Number.isFinite(l))).toEqual([]);
    latencies.sort((x, y) => x - y);
    const worst = latencies.at(-1)!;
    expect(worst).toBeLessThan(2000);

    // Memory: a generous bound on the peak (it moves with GC; an unbounded buffer of these
    // doorbells would only add ~1 KiB each), and no upward trend while only dropping.
    const rssGrowth = Math.max(...waves.map((w) => w.rss)) - baseline.rss;
    const heapGrowth = Math.max(...waves.map((w) => w.heap)) - baseline.heap;
    expect(rssGrowth).toBeLessThan(192 * 1024 * 1024);
    expect(heapGrowth).toBeLessThan(128 * 1024 * 1024);
    const dropOnly = waves.slice(bound);
    const rssDuringDrops = dropOnly.at(-1)!.rss - dropOnly[0]!.rss;
    // Still serving, and the slow session is still attached (a slow reader is not disconnected).
    expect((await fetch(`${serve.url}/healthz`)).status).toBe(200);
    expect(slowSocket.destroyed).toBe(false);

    console.info(
      `[faults] slow consumer: ${final.pushed} doorbells aimed at a stream that is never read; ${final.written} written ` +
        `(the kernel's socket buffers plus at most ${DOORBELL_BUFFER} unflushed frames), ${dropped} dropped; written per wave of ${WAVE} ` +
        `${waves.map((w) => w.written).join(' → ')}; serve RSS ${MiB(baseline.rss)} at rest → peak +${MiB(rssGrowth)} ` +
        `(per wave ${waves.map((w) => MiB(w.rss).replace(' MiB', '')).join(', ')} MiB), RSS change over the drop-only waves ` +
        `${MiB(rssDuringDrops)}; heap used ${MiB(baseline.heap)} → peak +${MiB(heapGrowth)}; healthy agent heard all ${latencies.length} ` +
        `of its doorbells, median ${latencies[Math.floor(latencies.length / 2)]} ms, worst ${worst} ms`,
    );
  });
});
