import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { App } from '../../src/app.ts';
import type { Sql } from '../../src/db/connect.ts';

/** What `POST /api/v1/endpoints` answers, as the tests use it. */
export interface Vended {
  id: string;
  slug: string;
  token: string;
  mcp_url: string;
}

/** A doorbell as an SDK client receives it. */
export type Notification = { method: string; params: { content: string; meta: Record<string, string> } };

/** Polls `cond` (I/O is real even when the clock is not) until it holds, or fails naming `what`. */
export async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits for the record of a written doorbell, by its ring id or its todo's id. The writer inserts
 * it without waiting (DoorbellAcks.recordWritten), so a client can hear the doorbell, or the test
 * read its delivery, before the record exists. A test that reads the record, or claims the todo to
 * show that the claim acknowledges it, waits for it first.
 */
export async function untilRingRecorded(sql: Sql, key: { ring_id: string } | { todo_id: string }): Promise<void> {
  const [column, value] = Object.entries(key)[0]!;
  await until(async () => (await sql`select 1 from doorbell_rings where ${sql(column)} = ${value}`).length > 0, `the ring record of ${value}`);
}

/** A short real pause, to show that nothing more arrives. */
export const settle = (ms = 150) => new Promise((r) => setTimeout(r, ms));

export interface Agent {
  client: Client;
  sessionId: string;
  /** Every notification the client received, in order. */
  heard: Notification[];
  digests: () => Notification[];
  /** Self-test doorbells. */
  tests: () => Notification[];
  /** Calls a tool: the parsed JSON result, or `{error: "<code>: <message>", details}` for a tool error. */
  call: (name: string, args?: Record<string, unknown>) => Promise<any>;
}

/**
 * An MCP SDK Client connected to `app` as endpoint `e`, resolved once its notification stream is
 * open on that instance and the reconnect digest that opening starts is decided (sent or not), so
 * a todo pushed next is rung on its own, never folded into that digest. Clients are pushed onto `track` so the file can close them at the end.
 */
export async function connectAgent(app: App, e: Pick<Vended, 'slug' | 'token'>, opts: { name?: string; track?: Client[] } = {}): Promise<Agent> {
  const heard: Notification[] = [];
  const client = new Client({ name: opts.name ?? 'claude-code', version: '2.1.0' });
  client.fallbackNotificationHandler = async (n) => void heard.push(n as unknown as Notification);
  const transport = new StreamableHTTPClientTransport(new URL(`${app.url}/mcp/${e.slug}`), {
    requestInit: { headers: { Authorization: `Bearer ${e.token}` } },
  });
  await client.connect(transport);
  opts.track?.push(client);
  const sessionId = transport.sessionId!;
  await until(() => app.services.sessions.all().some((s) => s.id === sessionId && s.stream !== null), 'the stream to open');
  await app.services.presence.reconnectsSettled();
  return {
    client,
    sessionId,
    heard,
    digests: () => heard.filter((n) => n.params.meta.kind === 'digest'),
    tests: () => heard.filter((n) => n.params.meta.kind === 'self_test'),
    call: async (name, args = {}) => {
      const r = (await client.callTool({ name, arguments: args })) as {
        content: { text: string }[];
        structuredContent?: { error?: Record<string, unknown> };
        isError?: boolean;
      };
      return r.isError ? { error: r.content[0]!.text, details: r.structuredContent?.error } : JSON.parse(r.content[0]!.text);
    },
  };
}
