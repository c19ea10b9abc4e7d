/**
 * The agents' side of bench/mcp-claim.ts, run in its own process the way real agents are:
 * `workers` MCP sessions draining one endpoint with claim_next + complete. Prints one JSON
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
 *   tsx bench/mcp-driver.ts <sdk|raw> <mcp url> <credential> <workers>
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, request } from 'node:http';
import { once } from 'node:events';
import { MCP_DRIVER_WARM, WARMUP_JOBS, drain } from './lib.ts';

const [mode, url, credential, workersArg] = process.argv.slice(2);
const workers = Number(workersArg);
if ((mode !== 'sdk' && mode !== 'raw') || !url || !credential || !workers) {
  console.error('usage: tsx bench/mcp-driver.ts <sdk|raw> <mcp url> <credential> <workers>');
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

async function rawCallers(): Promise<{ calls: Call[]; close(): Promise<void> }> {
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
      const init = await rpc({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
      await rpc({ jsonrpc: '2.0', method: 'notifications/initialized' }, init.sid);
      return init.sid!;
    }),
  );
  let id = 1;
  return {
    calls: sids.map((sid) => async (name, args) => {
      const r = await rpc({ jsonrpc: '2.0', id: id++, method: 'tools/call', params: { name, arguments: args } }, sid);
      return JSON.parse(r.json.result.content[0].text);
    }),
    close: async () => agent.destroy(),
  };
}

const { calls, close } = mode === 'sdk' ? await sdkCallers() : await rawCallers();
const claimAndComplete = async (w: number) => {
  const call = calls[w]!;
  const next = (await call('claim_next', {})) as { empty: boolean; todo?: { id: string } };
  if (next.empty) return false;
  await call('complete', { id: next.todo!.id, result: { ok: true } });
  return true;
};
await drain(workers, claimAndComplete, WARMUP_JOBS);
process.stdout.write(`${MCP_DRIVER_WARM}\n`);
await once(process.stdin, 'data');
process.stdin.pause();
const cpu0 = process.cpuUsage();
const result = await drain(workers, claimAndComplete);
const used = process.cpuUsage(cpu0);
await close();
process.stdout.write(`${JSON.stringify({ ...result, agentCpuMs: (used.user + used.system) / 1000 })}\n`);
