/**
 * The agents' side of bench/sessions.ts: opens MCP sessions with bare HTTP (initialize, then a GET
 * stream each) and reports, per doorbell, its todo id and arrival time. Commands on stdin, one
 * JSON object per line:
 *   {"open": n, "url": "<mcp url>", "credential": "sbk_..."} → {"opened": total}
 *   {"close": "<mcp url>"} → {"closed": n}: ends the streams opened on that URL (the sessions stay)
 *   {"report": true} → {"arrivals": [...]}
 *
 *   tsx bench/sessions-driver.ts
 */
import { Agent, request, type ClientRequest } from 'node:http';
import { createInterface } from 'node:readline';

const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
const arrivals: { todo_id: string; at: number }[] = [];
const streams = new Map<string, ClientRequest[]>();
let opened = 0;

function post(url: string, credential: string, body: unknown, sid?: string): Promise<string | undefined> {
  const headers = { authorization: `Bearer ${credential}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: sid ? { ...headers, 'mcp-session-id': sid } : headers }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 || res.statusCode === 202 ? resolve(res.headers['mcp-session-id'] as string | undefined) : reject(new Error(`POST ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** A GET stream on its own socket, read frame by frame. */
function stream(url: string, credential: string, sid: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', headers: { authorization: `Bearer ${credential}`, accept: 'text/event-stream', 'mcp-session-id': sid } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`GET ${res.statusCode}`));
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = frame.split('\n').find((l) => l.startsWith('data: '));
          if (!data) continue;
          const msg = JSON.parse(data.slice(6)) as { params?: { meta?: { todo_id?: string } } };
          const id = msg.params?.meta?.todo_id;
          if (id) arrivals.push({ todo_id: id, at: performance.timeOrigin + performance.now() });
        }
      });
      res.on('error', () => {});
      resolve();
    });
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    req.end();
    streams.set(url, [...(streams.get(url) ?? []), req]);
  });
}

async function openOne(url: string, credential: string): Promise<void> {
  const init = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } };
  const sid = await post(url, credential, init);
  await post(url, credential, { jsonrpc: '2.0', method: 'notifications/initialized' }, sid);
  await stream(url, credential, sid!);
  opened++;
}

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line) as { open?: number; url?: string; credential?: string; close?: string; report?: boolean };
  if (cmd.open) {
    for (let i = 0; i < cmd.open; i += 50) await Promise.all(Array.from({ length: Math.min(50, cmd.open - i) }, () => openOne(cmd.url!, cmd.credential!)));
    process.stdout.write(`${JSON.stringify({ opened })}\n`);
  } else if (cmd.close) {
    const mine = streams.get(cmd.close) ?? [];
    for (const req of mine) req.destroy();
    streams.delete(cmd.close);
    opened -= mine.length;
    process.stdout.write(`${JSON.stringify({ closed: mine.length })}\n`);
  } else if (cmd.report) {
    process.stdout.write(`${JSON.stringify({ arrivals: arrivals.splice(0) })}\n`);
  }
}
process.exit(0);
