/**
 * The agents' side of bench/sessions.ts: opens MCP sessions with bare HTTP (initialize, then a GET
 * stream each) and reports, per doorbell, its todo id and arrival time. Commands on stdin, one
 * JSON object per line: {"open": n} → {"opened": total}; {"report": true} → {"arrivals": [...]}.
 *
 *   tsx bench/sessions-driver.ts <mcp url> <credential>
 */
import { Agent, request } from 'node:http';
import { createInterface } from 'node:readline';

const [url, credential] = process.argv.slice(2) as [string, string];
const agent = new Agent({ keepAlive: true, maxSockets: Infinity });
const headers = { authorization: `Bearer ${credential}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const arrivals: { todo_id: string; at: number }[] = [];
let opened = 0;

function post(body: unknown, sid?: string): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', agent, headers: sid ? { ...headers, 'mcp-session-id': sid } : headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.headers['mcp-session-id'] as string | undefined));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** A GET stream on its own socket, read frame by frame. */
function stream(sid: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', headers: { authorization: headers.authorization, accept: 'text/event-stream', 'mcp-session-id': sid } }, (res) => {
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
      resolve();
    });
    req.on('error', reject);
    req.end();
  });
}

async function openOne(): Promise<void> {
  const sid = await post({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } });
  await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, sid);
  await stream(sid!);
  opened++;
}

for await (const line of createInterface({ input: process.stdin })) {
  const cmd = JSON.parse(line) as { open?: number; report?: boolean };
  if (cmd.open) {
    for (let i = 0; i < cmd.open; i += 50) await Promise.all(Array.from({ length: Math.min(50, cmd.open - i) }, openOne));
    process.stdout.write(`${JSON.stringify({ opened })}\n`);
  } else if (cmd.report) {
    process.stdout.write(`${JSON.stringify({ arrivals: arrivals.splice(0) })}\n`);
  }
}
process.exit(0);
