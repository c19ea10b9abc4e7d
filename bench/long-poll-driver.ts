/**
 * The agents' and the pusher's side of bench/long-poll.ts, in a process of its own so the server
 * process's CPU time counts only the server. One SDK Client per endpoint takes work one todo at a
 * time (claim_next, then complete) in one of two ways:
 *   - long: claim_next {wait: "30s"} again and again;
 *   - poll: claim_next, and after an empty answer sleep 1 s before the next.
 * Meanwhile todos are committed straight into the database (the NOTIFY goes with the insert), one
 * every `interval` ms (0: none, the agents idle), round robin over the endpoints, for `seconds`. Prints one JSON line:
 * each todo's wake-up latency (its push began -> claim_next returned it, ms) and the call counts.
 *
 *   tsx bench/long-poll-driver.ts <long|poll> <base url> <database url> <seconds> <interval ms> '<endpoints json>'
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { connect } from '../src/db/connect.ts';
import { systemClock } from '../src/lib/clock.ts';
import { insertEventAndTodo } from '../src/store/todos/index.ts';

const [mode, baseUrl, databaseUrl, secondsArg, intervalArg, endpointsJson] = process.argv.slice(2);
if ((mode !== 'long' && mode !== 'poll') || !baseUrl || !databaseUrl || !endpointsJson) {
  console.error("usage: tsx bench/long-poll-driver.ts <long|poll> <base url> <database url> <seconds> <interval ms> '<endpoints json>'");
  process.exit(2);
}
const seconds = Number(secondsArg);
const interval = Number(intervalArg);
const endpoints = JSON.parse(endpointsJson) as { id: string; slug: string; credential: string }[];
const POLL_MS = 1_000;
const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const sql = connect(databaseUrl, { max: 2 });
/** When each todo's push began (its insert, commit and NOTIFY are part of the wake-up), and when claim_next returned it. */
const pushedAt = new Map<string, number>();
const claimedAt = new Map<string, number>();
let calls = 0;
let stopping = false;

const clients = await Promise.all(
  endpoints.map(async (e) => {
    const c = new Client({ name: 'bench-long-poll', version: '1' });
    await c.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp/${e.slug}`), { requestInit: { headers: { Authorization: `Bearer ${e.credential}` } } }));
    return c;
  }),
);
const call = async (c: Client, name: string, args: Record<string, unknown>) => {
  calls++;
  const r = (await c.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as { content: { text: string }[] };
  return JSON.parse(r.content[0]!.text);
};

async function agent(c: Client): Promise<void> {
  while (!stopping) {
    const answer = await call(c, 'claim_next', mode === 'long' ? { wait: '30s' } : {});
    if (answer.empty) {
      if (mode === 'poll') await sleep(POLL_MS);
      continue;
    }
    claimedAt.set(answer.todo.id, now());
    await call(c, 'complete', { id: answer.todo.id, result: { ok: true } });
  }
}

async function pusher(): Promise<number> {
  const end = now() + seconds * 1000;
  let n = 0;
  // No pushes (interval 0): the agents only wait, for `seconds`.
  if (interval <= 0) {
    await sleep(seconds * 1000);
    return 0;
  }
  while (now() < end) {
    const e = endpoints[n % endpoints.length]!;
    const t0 = now();
    const { todo } = await insertEventAndTodo(
      sql,
      { source: 'operator', family: 'operator', trustMode: 'operator', verified: true },
      { endpointId: e.id, queue: 'work', title: `job ${n}` },
      systemClock.now(),
    );
    pushedAt.set(todo.id, t0);
    n++;
    await sleep(interval);
  }
  return n;
}

const agents = clients.map((c) => agent(c));
const pushed = await pusher();
// Every pushed todo is claimed within a poll interval (plus a margin) in either mode.
const deadline = now() + 5_000;
while (claimedAt.size < pushed && now() < deadline) await sleep(50);
stopping = true;
// Long polls still waiting end with their sessions.
await Promise.all(clients.map((c) => c.close().catch(() => {})));
await Promise.allSettled(agents);
await sql.end({ timeout: 5 });
const latencies = [...claimedAt].flatMap(([id, at]) => (pushedAt.has(id) ? [at - pushedAt.get(id)!] : []));
console.log(JSON.stringify({ pushed, claimed: latencies.length, calls, latencies }));
process.exit(0);
