import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Sql } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';
import { createLoginLink } from '../../src/store/web-sessions.ts';
import { humanWithToken } from '../support/app.ts';
import { keepChurning, manyEndpoints, readStream, stalledStream, type ReadStream } from '../support/board-events.ts';
import { createTestDatabase, type TestDatabase } from '../support/database.ts';
import { apiCaller, push, vend } from '../support/fixtures.ts';
import { rssOf, sleep, spawnServe, stopAllServes, waitFor, type ServeProcess } from '../support/processes.ts';

/**
 * Fault (#17 item 3): 80 browser tabs open the board's live-update stream (/events) and never
 * read it, while their human's 4,000 endpoints all change at every look (about 0.9 MB of frames a
 * look). Before the fix every frame was queued for every stream: the kernel's socket buffers
 * filled in a few looks, then the process grew by the whole flood (26 MB → 404 MB in 4 minutes was
 * measured). Now a stream holds at most 64 KiB unsent and a look bigger than that goes out as one
 * `ready`. The serve process's RSS with the 80 streams open must stay within a bound of the RSS
 * measured under the same flood without them, and another human's reader must keep getting its
 * events at the next look.
 */

const STREAMS = 80;
const PER_SESSION = 8;
const ENDPOINTS = 4000;
const BASELINE_MS = 14_000;
const FLOOD_MS = 30_000;
const MiB = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

let db: TestDatabase;
let sql: Sql;
let serve: ServeProcess;
const sockets: Socket[] = [];
const readers: ReadStream[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  sql = connect(db.url, { max: 3 });
  await migrate(sql);
  serve = await spawnServe({ databaseUrl: db.url, logLevel: 'warn' });
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const r of readers) r.close();
  await stopAllServes();
  await sql?.end({ timeout: 5 });
  await db?.drop();
});

/** A board session cookie for the human, signed in through the serve process. */
async function signIn(handle: string): Promise<string> {
  const { token } = await createLoginLink(sql, handle, new Date());
  const r = await fetch(`${serve.url}/login/${token}`, { method: 'POST', redirect: 'manual' });
  expect(r.status).toBe(303);
  return /^(sb_session=[^;]+)/.exec(r.headers.get('set-cookie')!)![1]!;
}

/** Samples the serve process's RSS every 500 ms for `ms`. */
async function sampleRss(ms: number): Promise<number[]> {
  const samples: number[] = [];
  const end = Date.now() + ms;
  while (Date.now() < end) {
    samples.push(await rssOf(serve.pid));
    await sleep(500);
  }
  return samples;
}

describe('80 board event streams that are never read', () => {
  it('leave the serve process’s memory flat under a flood of changes, and another human still gets its events', async () => {
    const flood = await humanWithToken(sql);
    const other = await humanWithToken(sql);
    await manyEndpoints(sql, flood.id, ENDPOINTS);
    const api = apiCaller(serve.url, other.token);
    const mine = await vend(api, { name: 'steady', queues: ['work'] });

    // Another human's tab, and one reading tab of the flooded human.
    const steady = await readStream(serve.url, await signIn(other.handle));
    const floodReader = await readStream(serve.url, await signIn(flood.handle));
    readers.push(steady, floodReader);
    await waitFor(() => steady.events.some((e) => e.event === 'ready') && floodReader.events.some((e) => e.event === 'ready'), 'both readers ready', 20_000);

    // The other human pushes a todo every second; its reader should see each at the next look.
    const latencies: number[] = [];
    let pushing = true;
    let pushed = 0;
    const pusher = (async () => {
      for (let i = 0; pushing; i++) {
        const at = Date.now();
        const id = (await push(api, mine.slug, { title: `steady ${i}` })).id;
        pushed++;
        void waitFor(() => steady.events.some((e) => e.event === 'todo' && e.data.id === id), `the event of ${id}`, 15_000, 10).then(
          () => latencies.push(Date.now() - at),
          () => latencies.push(Infinity),
        );
        await sleep(1000);
      }
    })();

    const churn = keepChurning(sql, flood.id, 1000);
    try {
      // Baseline: the same flood with only the two readers.
      await sleep(4000);
      const baseline = await sampleRss(BASELINE_MS);

      // 80 tabs of the flooded human (8 per browser session) that read the response head and nothing more.
      for (let s = 0; s < STREAMS / PER_SESSION; s++) {
        const cookie = await signIn(flood.handle);
        for (let i = 0; i < PER_SESSION; i++) sockets.push((await stalledStream(serve.url, cookie)).socket);
      }
      const flooded = await sampleRss(FLOOD_MS);
      pushing = false;
      await pusher;
      await waitFor(() => latencies.length === pushed, 'every push timed', 20_000);

      const peak = (xs: number[]) => Math.max(...xs);
      const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      const growth = peak(flooded) - peak(baseline);
      const floodReadies = floodReader.events.filter((e) => e.event === 'ready').length;
      const sorted = [...latencies].sort((a, b) => a - b);
      console.info(
        `[faults] board events: ${STREAMS} never-read /events streams of a human whose ${ENDPOINTS} endpoints all change every second; ` +
          `serve RSS without them (same flood) median ${MiB(median(baseline))}, peak ${MiB(peak(baseline))}; with them median ${MiB(median(flooded))}, ` +
          `peak ${MiB(peak(flooded))} (peak growth ${MiB(growth)}, last ${MiB(flooded.at(-1)!)}); the flooded human's reading tab got ` +
          `${floodReadies} ready events (each look too big for one stream is one ready); another human's tab saw ${latencies.length} todos, ` +
          `median ${median(sorted)} ms, worst ${sorted.at(-1)} ms after the push`,
      );
      // Unbounded, each stream would queue ~0.9 MB a look once its kernel buffers (~4 MB) are full
      // (+522 MiB measured); the peaks move with GC by a few tens of MiB.
      expect(growth).toBeLessThan(64 * 1024 * 1024);
      expect(flooded.at(-1)! - median(baseline)).toBeLessThan(48 * 1024 * 1024);
      expect(floodReadies).toBeGreaterThan(5);
      expect(sorted.filter((l) => !Number.isFinite(l))).toEqual([]);
      expect(sorted.at(-1)!).toBeLessThan(6000);
      expect((await fetch(`${serve.url}/healthz`)).status).toBe(200);
    } finally {
      pushing = false;
      await churn.stop();
    }
  });
});
