/**
 * The agents' side of bench/mcp-claim.ts, run in its own process the way real agents are:
 * `workers` MCP sessions draining one endpoint. Prints one JSON
 * DrainResult on stdout, with the agents' own CPU per job.
 *
 * Before the clock starts the sessions drain WARMUP_JOBS todos (not timed), as every drain it is
 * set beside does (bench/lib.ts): this process starts cold, and a 1,000-job drain lasts two
 * seconds, long enough for the agents' own JIT warm-up to be a fifth of it. Seed the endpoint
 * with that many todos more than the timed drain takes.
 *
 * Once warm it prints MCP_DRIVER_WARM and waits for a line on stdin before it starts the clock,
 * so the bench (runMcpDriver in bench/lib.ts) counts the server's and PostgreSQL's CPU for the
 * drain alone.
 *
 * How the agents call (McpDriverMode): `sdk`, the MCP SDK's Client, what a real agent runs; `http`,
 * bare keep-alive node:http requests; `wire`, the same requests written on keep-alive sockets by
 * hand (wireCallers), the lightest load on the cores this process shares with the server.
 *
 * How each agent takes its jobs (McpDriverLoop): `two-calls` (the default), claim_next then
 * complete; `next`, complete with next: true, whose answer is the next job (one call per job; a
 * worker's first call is a claim_next, and the todo it holds when the warm-up ends is completed by
 * its first timed call).
 *
 * With `jobs` the timed drain stops once that many steps have begun (the queue seeded with more),
 * so it ends on a full queue rather than on each worker's empty claim_next (bench/instances.ts).
 *
 *   tsx bench/mcp-driver.ts <sdk|http|wire> <mcp url> <credential> <workers> [two-calls|next] [jobs]
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, request } from 'node:http';
import { once } from 'node:events';
import { connect } from 'node:net';
import { MCP_DRIVER_WARM, WARMUP_JOBS, drain, isDriverLoop, isDriverMode } from './lib.ts';

const [mode, url, credential, workersArg, loop = 'two-calls', jobsArg] = process.argv.slice(2);
const workers = Number(workersArg);
const timedJobs = jobsArg === undefined ? Infinity : Number(jobsArg);
if (!isDriverMode(mode) || !url || !credential || !workers || !isDriverLoop(loop) || !(timedJobs > 0)) {
  console.error('usage: tsx bench/mcp-driver.ts <sdk|http|wire> <mcp url> <credential> <workers> [two-calls|next] [jobs]');
  process.exit(2);
}

type Call = (name: string, args: Record<string, unknown>) => Promise<any>;

async function sdkCallers(): Promise<{ calls: Call[]; close(): Promise<void> }> {
  const clients = await Promise.all(
    Array.from({ length: workers }, async () => {
      const c = new Client({ name: 'bench', version: '1' });
      await c.connect(new StreamableHTTPClientTransport(new URL(url!), { requestInit: { headers: { Authorization: `Bearer ${credential}` } } }));
      return c;
    }),
  );
  return {
    calls: clients.map((c) => async (name, args) => {
      const r = (await c.callTool({ name, arguments: args })) as { content: { text: string }[] };
      return JSON.parse(r.content[0]!.text);
    }),
    close: async () => void (await Promise.all(clients.map((c) => c.close()))),
  };
}

/** Opens `workers` MCP sessions over node:http (initialize, then initialized); each call after is a POST. */
async function httpSessions() {
  const agent = new Agent({ keepAlive: true, maxSockets: workers });
  const headers = { authorization: `Bearer ${credential}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const rpc = (body: unknown, sid?: string) =>
    new Promise<{ sid?: string; json: any }>((resolve, reject) => {
      const req = request(url!, { method: 'POST', agent, headers: sid ? { ...headers, 'mcp-session-id': sid } : headers }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ sid: res.headers['mcp-session-id'] as string | undefined, json: text ? JSON.parse(text) : null }));
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  const sids = await Promise.all(
    Array.from({ length: workers }, async () => {
      const init = await rpc({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } });
      await rpc({ jsonrpc: '2.0', method: 'notifications/initialized' }, init.sid);
      return init.sid!;
    }),
  );
  return { sids, rpc, close: async () => agent.destroy() };
}

let nextId = 1;
const toolCall = (name: string, args: Record<string, unknown>) => ({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } });

async function httpCallers(): Promise<{ calls: Call[]; close(): Promise<void> }> {
  const { sids, rpc, close } = await httpSessions();
  return {
    calls: sids.map((sid) => async (name, args) => {
      const r = await rpc(toolCall(name, args), sid);
      return JSON.parse(r.json.result.content[0].text);
    }),
    close,
  };
}

/**
 * The sessions of httpSessions, each call then written by hand on a keep-alive socket of its own
 * and its answer read by Content-Length, as HTTP load generators (wrk, autocannon) do: node:http's
 * client machinery costs the agents' process about twice the CPU per call, on the cores the server
 * and PostgreSQL share. The server answers a tools/call with a JSON body of known length; any
 * other answer stops the drain.
 */
async function wireCallers(): Promise<{ calls: Call[]; close(): Promise<void> }> {
  const { sids, close } = await httpSessions();
  const target = new URL(url!);
  const sockets = await Promise.all(
    sids.map(async () => {
      const socket = connect({ host: target.hostname.replace(/^\[|\]$/g, ''), port: Number(target.port), noDelay: true });
      await once(socket, 'connect');
      return socket;
    }),
  );
  const calls = sids.map((sid, w): Call => {
    const socket = sockets[w]!;
    const head =
      `POST ${target.pathname} HTTP/1.1\r\nhost: ${target.host}\r\nauthorization: Bearer ${credential}\r\n` +
      `content-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-session-id: ${sid}\r\ncontent-length: `;
    let answer: ((body: string) => void) | null = null;
    let received: Buffer = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      received = received.length ? Buffer.concat([received, chunk]) : chunk;
      const headEnd = received.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const headText = received.toString('latin1', 0, headEnd);
      const length = /\r\ncontent-length: *(\d+)/i.exec(headText)?.[1];
      if (!headText.startsWith('HTTP/1.1 200') || length === undefined) throw new Error(`unexpected answer: ${headText}`);
      const end = headEnd + 4 + Number(length);
      if (received.length < end) return;
      const body = received.toString('utf8', headEnd + 4, end);
      received = received.subarray(end);
      const settle = answer!;
      answer = null;
      settle(body);
    });
    return (name, args) =>
      new Promise((resolve) => {
        const body = JSON.stringify(toolCall(name, args));
        answer = (text) => resolve(JSON.parse(JSON.parse(text).result.content[0].text));
        socket.write(`${head}${Buffer.byteLength(body)}\r\n\r\n${body}`);
      });
  });
  return {
    calls,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await close();
    },
  };
}

const callers = { sdk: sdkCallers, http: httpCallers, wire: wireCallers }[mode]!;
const { calls, close } = await callers();
type ClaimNextAnswer = { empty: boolean; todo?: { id: string } };
const claimAndComplete = async (w: number) => {
  const call = calls[w]!;
  const next = (await call('claim_next', {})) as ClaimNextAnswer;
  if (next.empty) return false;
  await call('complete', { id: next.todo!.id, result: { ok: true } });
  return true;
};
/** The todo each worker holds between its calls (completeWithNext). */
const held: (string | null)[] = Array.from({ length: workers }, () => null);
const completeWithNext = async (w: number) => {
  const call = calls[w]!;
  const id = held[w];
  const next = (id ? (await call('complete', { id, result: { ok: true }, next: true })).next : await call('claim_next', {})) as ClaimNextAnswer;
  if (typeof next.empty !== 'boolean') throw new Error(`the claim after a complete failed: ${JSON.stringify(next)}`);
  held[w] = next.empty ? null : next.todo!.id;
  return !next.empty;
};
const step = loop === 'next' ? completeWithNext : claimAndComplete;
await drain(workers, step, WARMUP_JOBS);
process.stdout.write(`${MCP_DRIVER_WARM}\n`);
await once(process.stdin, 'data');
process.stdin.pause();
const cpu0 = process.cpuUsage();
const result = await drain(workers, step, timedJobs);
const used = process.cpuUsage(cpu0);
await close();
process.stdout.write(`${JSON.stringify({ ...result, agentCpuMs: (used.user + used.system) / 1000 })}\n`);
