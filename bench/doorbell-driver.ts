/**
 * The agents' side of bench/doorbell-latency.ts, run in its own process the way real agents are:
 * one SDK Client per endpoint, each with its stream open, recording when each doorbell arrives.
 *
 * Protocol over stdio. In: one JSON line `[{ url, credential }, ...]`, then a line `stop` (or
 * EOF) when the run is over. Out: `{"ready":n}` once every client is connected, then one line
 * `{"todo_id":..., "at":...}` per doorbell heard, `at` in ms on the wall-clock timeline
 * (`performance.timeOrigin + performance.now()`, comparable across processes on one machine).
 *
 *   tsx bench/doorbell-driver.ts
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createInterface } from 'node:readline';

interface Target {
  url: string;
  credential: string;
}

const CHANNEL_METHOD = 'notifications/claude/channel';
const now = () => performance.timeOrigin + performance.now();
const emit = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const first = await lines.next();
if (first.done) process.exit(2);
const targets = JSON.parse(first.value) as Target[];

const clients = await Promise.all(
  targets.map(async ({ url, credential }) => {
    const client = new Client({ name: 'doorbell-bench', version: '1' });
    client.fallbackNotificationHandler = async (n) => {
      const at = now();
      const meta = (n.params as { meta?: Record<string, string> } | undefined)?.meta;
      if (n.method === CHANNEL_METHOD && meta?.todo_id) emit({ todo_id: meta.todo_id, at });
    };
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${credential}` } } }));
    return client;
  }),
);
emit({ ready: clients.length });

// Wait for `stop` or EOF, then hang up.
for (;;) {
  const next = await lines.next();
  if (next.done || next.value.trim() === 'stop') break;
}
await Promise.all(clients.map((c) => c.close().catch(() => {})));
process.exit(0);
