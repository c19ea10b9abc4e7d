import net from 'node:net';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startThrowawayCluster, type RunningCluster } from '../support/throwaway-cluster.ts';
import { connect, type Sql } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';
import { apiCaller, humanWithToken } from '../support/app.ts';
import { vend } from '../support/fixtures.ts';
import { rssOf, sleep, spawnServe, stopAllServes, type ServeProcess } from '../support/processes.ts';

/**
 * Fault (issue 17, item 1): 400 anonymous senders open deliveries to made-up webhook URLs, each
 * promising a 5 MB body and trickling it a byte every 200 ms, from 400 loopback addresses. They
 * are refused as their headers arrive, so the server's memory stays within 100 MB of idle, and
 * a real delivery from another address is accepted (202) meanwhile.
 */

const SENDERS = 400;
const MiB = 2 ** 20;

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

/** A sender that never finishes its body; tracks whether the server answered or closed on it. */
function slowSender(port: number, i: number) {
  const state = { answered: '', closed: false };
  const socket = net.connect({ port, host: '127.0.0.1', localAddress: `127.0.${20 + Math.floor(i / 200)}.${(i % 200) + 1}` });
  socket.on('error', () => {});
  socket.on('data', (c) => (state.answered ||= c.toString('latin1').split('\r\n')[0]!));
  socket.on('close', () => (state.closed = true));
  socket.write(`POST /webhooks/w/made-up-${i} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n{`);
  const trickle = setInterval(() => !state.closed && socket.write('"'), 200);
  return { state, stop: () => (clearInterval(trickle), socket.destroy()) };
}

function deliver(url: string): Promise<number> {
  const agent = new http.Agent({ localAddress: '127.0.9.9' });
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(JSON.stringify({ title: 'a real delivery' }));
  });
}

describe('400 slow anonymous ingest connections', () => {
  it('are refused at their headers: memory stays near idle and a real delivery is accepted meanwhile', async () => {
    const human = await humanWithToken(sql);
    const api = apiCaller(serve.url, human.token);
    const e = await vend(api, { name: 'hooked', queues: ['inbox'] });
    const hook = await api('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'generic' });
    expect(hook.status).toBe(201);
    expect(await deliver(hook.json.ingest_url)).toBe(202);
    await sleep(500);
    const idle = await rssOf(serve.pid);

    const senders = Array.from({ length: SENDERS }, (_, i) => slowSender(serve.port, i));
    let peak = idle;
    let accepted = 0;
    try {
      for (let t = 0; t < 10; t++) {
        await sleep(500);
        peak = Math.max(peak, await rssOf(serve.pid));
        if ((await deliver(hook.json.ingest_url)) === 202) accepted++;
      }
      const answers = new Map<string, number>();
      for (const s of senders) answers.set(s.state.answered || '(none)', (answers.get(s.state.answered || '(none)') ?? 0) + 1);
      const closed = senders.filter((s) => s.state.closed).length;
      console.log(
        `[faults] slow ingest: ${SENDERS} anonymous senders trickling 5 MB bodies; answers ${JSON.stringify(Object.fromEntries(answers))}, ` +
          `${closed} connections closed by the server; RSS idle ${(idle / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB ` +
          `(+${((peak - idle) / MiB).toFixed(1)}); real deliveries meanwhile ${accepted}/10 answered 202`,
      );
      expect(peak - idle).toBeLessThan(100 * MiB);
      expect(accepted).toBe(10);
      expect(senders.every((s) => s.state.answered !== '')).toBe(true);
    } finally {
      for (const s of senders) s.stop();
    }
  }, 120_000);
});
