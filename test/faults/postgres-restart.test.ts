import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type App } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { startThrowawayCluster, type RunningCluster } from '../support/throwaway-cluster.ts';
import { connect, type Sql } from '../../src/db/connect.ts';
import { migrate } from '../../src/db/migrate.ts';
import { createLogger } from '../../src/lib/log.ts';
import { createToken } from '../../src/store/humans.ts';
import { apiCaller, humanWithToken } from '../support/app.ts';
import { vend as vendVia } from '../support/fixtures.ts';
import {
  connectRemoteAgent,
  restartCluster,
  sleep,
  stopCluster,
  stopClusterForAWhile,
  waitFor,
  type RemoteAgent,
} from '../support/processes.ts';

/**
 * Fault: PostgreSQL restarted under load (`pg_ctl restart -m fast`), and down for a while. Two app
 * instances with the system clock and every background loop on keep answering; producers push
 * todos through both the whole time and retry a failed push (5xx, 429, a broken connection) with
 * the same idempotency key, as a real producer would, while health checks keep both pools busy.
 * Throughout: no uncaught exception (vitest fails the run on one). Afterwards: every acknowledged
 * push is in the table exactly once; every pooled connection answers again; LISTEN works in both
 * directions and every todo pushed through one instance rang the agent on the other; the
 * presence evaluator resumed and sent its digest.
 */

let cluster: RunningCluster;
let sql: Sql;
let a: App;
let b: App;
const agents: RemoteAgent[] = [];
const logs = { a: '', b: '' };

async function instance(name: 'a' | 'b'): Promise<App> {
  const config = loadConfig({ SWITCHBOARD_DATABASE_URL: cluster.url, SWITCHBOARD_LISTEN: '127.0.0.1:0' });
  const log = createLogger('info', new Writable({ write: (c, _e, done) => void ((logs[name] += c.toString()), done()) }));
  return startApp({ config, log, loops: true });
}

beforeAll(async () => {
  cluster = await startThrowawayCluster({ prefer: 'system' });
  sql = connect(cluster.url, { max: 3 });
  await migrate(sql);
  [a, b] = await Promise.all([instance('a'), instance('b')]);
});

afterAll(async () => {
  await Promise.all(agents.map((g) => g.close()));
  await Promise.all([a?.stop(), b?.stop()]);
  await sql?.end({ timeout: 5 });
  // A restarted server is not the one the cluster recorded: stopCluster stops it too.
  await stopCluster(cluster);
});

interface Vended {
  id: string;
  slug: string;
  token: string;
  mcp_url: string;
}

interface PushRecord {
  key: string;
  via: 'a' | 'b';
  /** Failed attempts before the answer: their status, or what broke the connection. */
  failures: string[];
  /** The answer that settled it (201, or 200 for a retry whose first try had committed). */
  status?: number;
  id?: string;
  settledAt?: number;
}

const appOf = (via: 'a' | 'b') => (via === 'a' ? a : b);
const hears = (agent: RemoteAgent, todoId: string) => agent.heard.some((n) => n.params.meta.todo_id === todoId);

/** The human's fixture: endpoints and agents sitting on one instance, fed through the other. */
async function fixture(label: string) {
  const human = await humanWithToken(sql);
  const api = apiCaller(a.url, human.token);
  const vend = (name: string): Promise<Vended> => vendVia(api, { name: `${label}-${name}`, queues: ['jobs'] });
  /** An SDK agent of `e` on `app`, once its notification stream is open there. */
  const agentOn = async (app: App, e: Vended) => {
    const agent = await connectRemoteAgent(e.mcp_url, e.token, app.url);
    agents.push(agent);
    await waitFor(() => app.services.sessions.all().some((s) => s.id === agent.sessionId && s.stream !== null), 'the stream to open');
    return agent;
  };
  const crossToB = await vend('on-b'); // pushed through A, its agent sits on B
  const crossToA = await vend('on-a'); // pushed through B, its agent sits on A
  const load = await vend('load');
  return { human, api, vend, agentOn, crossToB, crossToA, load, onB: await agentOn(b, crossToB), onA: await agentOn(a, crossToA) };
}

/**
 * Producers, each with a token of its own (the write limit is per token), pushing every 250 ms
 * until stopped and retrying a failed push with the same key until it is acknowledged: four onto
 * `load` through A and B in turn, and two "ringers" onto the endpoints whose agents sit on the
 * other instance.
 */
function produce(f: Awaited<ReturnType<typeof fixture>>, label: string) {
  const records: PushRecord[] = [];
  let producing = true;
  const producer = async (name: string, e: Vended, via: (n: number) => 'a' | 'b') => {
    const { token } = await createToken(sql, { handle: f.human.handle });
    for (let n = 0; producing; n++) {
      const rec: PushRecord = { key: `${label}-${name}-${n}`, via: via(n), failures: [] };
      records.push(rec);
      const deadline = Date.now() + 60_000;
      while (rec.status === undefined && Date.now() < deadline) {
        try {
          const r = await fetch(`${appOf(rec.via).url}/api/v1/endpoints/${e.slug}/todos`, {
            method: 'POST',
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            body: JSON.stringify({ title: `pushed ${rec.key}`, key: rec.key, payload: { key: rec.key } }),
            signal: AbortSignal.timeout(10_000),
          });
          const body = (await r.json().catch(() => ({}))) as { id?: string };
          if (r.status === 201 || r.status === 200) {
            Object.assign(rec, { status: r.status, id: body.id, settledAt: Date.now() });
          } else if (r.status >= 500 || r.status === 429) {
            rec.failures.push(String(r.status));
            await sleep(r.status === 429 ? 1000 : 200);
          } else {
            throw new Error(`push ${rec.key} refused with ${r.status}: ${JSON.stringify(body)}`);
          }
        } catch (err) {
          if ((err as Error).message.startsWith('push ')) throw err;
          rec.failures.push((err as Error).name === 'TimeoutError' ? 'timeout' : 'connection error');
          await sleep(200);
        }
      }
      await sleep(250);
    }
  };
  const done = Promise.all([
    ...[0, 1, 2, 3].map((p) => producer(`load${p}`, f.load, (n) => ((p + n) % 2 ? 'b' : 'a'))),
    producer('ringB', f.crossToB, () => 'a'),
    producer('ringA', f.crossToA, () => 'b'),
  ]);
  return {
    records,
    async stop() {
      producing = false;
      await done;
    },
  };
}

/** Every acknowledged push is in the table exactly once, as the todo that was acknowledged. */
async function expectNothingLostOrDoubled(label: string, records: PushRecord[]): Promise<void> {
  expect(records.filter((r) => r.status === undefined)).toEqual([]);
  const rows = await sql<{ id: string; idempotency_key: string }[]>`
    select id, idempotency_key from todos where idempotency_key like ${`${label}-%`}`;
  const byKey = new Map<string, string[]>();
  for (const r of rows) byKey.set(r.idempotency_key, [...(byKey.get(r.idempotency_key) ?? []), r.id]);
  for (const rec of records) expect(byKey.get(rec.key), rec.key).toEqual([rec.id]);
  expect(rows).toHaveLength(records.length);
  const [events] = await sql<{ n: number }[]>`select count(*)::int as n from events where external_id like ${`${label}-%`}`;
  expect(events!.n).toBe(records.length);
}

/** Every todo a ringer got acknowledged rang the agent on the other instance; the worst delay. */
async function expectEveryRingerTodoRung(records: PushRecord[], ringer: string, agent: RemoteAgent): Promise<number> {
  const mine = records.filter((r) => r.key.includes(`-${ringer}-`));
  // How many pushes a ringer gets acknowledged depends on the machine's load; every one must ring.
  expect(mine.length).toBeGreaterThan(0);
  await waitFor(
    () => mine.every((r) => hears(agent, r.id!)),
    `doorbells for every ${ringer} todo: ${mine.filter((r) => !hears(agent, r.id!)).length} of ${mine.length} never rang`,
    20_000,
    50,
  );
  return Math.max(...mine.map((r) => agent.heard.find((n) => n.params.meta.todo_id === r.id)!.at - r.settledAt!));
}

/** Many small queries in flight through both pools when the fault hits (GET /healthz is one `select 1`). */
function hammer(): { stop(): Promise<void> } {
  let on = true;
  const loops = [a, b].flatMap((app) =>
    Array.from({ length: 10 }, async () => {
      while (on) await fetch(`${app.url}/healthz`, { signal: AbortSignal.timeout(2000) }).then((r) => r.arrayBuffer(), () => undefined);
    }),
  );
  return {
    async stop() {
      on = false;
      await Promise.all(loops);
    },
  };
}

/**
 * Every connection of both pools works again: 40 health checks at once per instance (more than a
 * pool's 10 connections) all answer within 5 s, and a second round answers 200. A connection the
 * fault left unable to send would hold its request until connect_timeout (30 s). The first round
 * may see a 503 from a connection whose backend the fault ended (57P01) and that is used first now.
 */
async function expectEveryConnectionAnswers(): Promise<number> {
  let worst = 0;
  for (const round of [1, 2]) {
    for (const app of [a, b]) {
      const answers = await Promise.all(
        Array.from({ length: 40 }, async () => {
          const t = Date.now();
          const status = await fetch(`${app.url}/healthz`, { signal: AbortSignal.timeout(5000) }).then(
            (r) => r.status,
            () => 0,
          );
          worst = Math.max(worst, Date.now() - t);
          return status;
        }),
      );
      expect(answers.filter((s) => s === 0), 'health checks with no answer within 5 s').toEqual([]);
      if (round === 2) expect(answers.filter((s) => s !== 200)).toEqual([]);
    }
  }
  return worst;
}

/** What a producer saw: the longest wait between two acknowledged pushes through one instance. */
function longestGap(records: PushRecord[], via: 'a' | 'b'): number {
  const at = records.filter((r) => r.via === via).map((r) => r.settledAt!).sort((x, y) => x - y);
  return Math.max(...at.slice(1).map((t, i) => t - at[i]!));
}

function failureSummary(records: PushRecord[]): string {
  const failed = records.filter((r) => r.failures.length > 0);
  const kinds = new Map<string, number>();
  for (const r of failed) for (const f of r.failures) kinds.set(f, (kinds.get(f) ?? 0) + 1);
  return (
    `${records.length} pushes, ${failed.length} needed retries (${[...kinds].map(([k, v]) => `${v}× ${k}`).join(', ') || 'none'}), ` +
    `${failed.filter((r) => r.status === 200).length} of those answered 200 created:false`
  );
}

function errorLines(since: number): string {
  const lines = [...logs.a.split('\n'), ...logs.b.split('\n')]
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { level: number; time: number; msg: string })
    .filter((l) => l.level >= 50 && l.time >= since);
  return `${lines.length} error log lines (${[...new Set(lines.map((l) => l.msg))].join('; ') || 'none'})`;
}

describe('PostgreSQL restarted under load', () => {
  it('both instances keep serving, LISTEN and the loops resume, and no acknowledged todo is lost or doubled', async () => {
    const f = await fixture('restart');
    const startedAt = Date.now();

    // Before the fault: LISTEN carries a todo pushed through one instance to an agent on the other.
    const before = await f.api('POST', `/api/v1/endpoints/${f.crossToB.slug}/todos`, { title: 'before the restart' });
    await waitFor(() => hears(f.onB, before.json.id), 'the cross-instance doorbell before the restart', 5000);

    // `away` is out until a few seconds after the restart; todos pushed meanwhile are held.
    const away = await f.vend('away');
    const awayAgent = await f.agentOn(b, away);
    const outUntil = new Date(Date.now() + 8_000);
    outUntil.setMilliseconds(0);
    const out = await f.api('PUT', `/api/v1/endpoints/${away.slug}/presence`, { presence: 'out', until: outUntil.toISOString() });
    expect(out.status).toBe(200);
    expect(out.json.presence).toBe('out');
    const held: string[] = [];
    for (let i = 0; i < 3; i++) held.push((await f.api('POST', `/api/v1/endpoints/${away.slug}/todos`, { title: `held ${i}` })).json.id);

    const load = produce(f, 'restart');
    const busy = hammer();
    await sleep(1000);
    const restartStarted = Date.now();
    await restartCluster(cluster);
    const restartEnded = Date.now();
    await sleep(3000);
    await Promise.all([load.stop(), busy.stop()]);
    const worstProbe = await expectEveryConnectionAnswers();

    await expectNothingLostOrDoubled('restart', load.records);
    const worstToB = await expectEveryRingerTodoRung(load.records, 'ringB', f.onB);
    const worstToA = await expectEveryRingerTodoRung(load.records, 'ringA', f.onA);

    // The presence evaluator resumed (a 30 s loop): once `away`'s override ran out one instance
    // claims the return to in, and one digest of the held todos reaches the agent on B.
    const digest = await waitFor(() => awayAgent.heard.find((n) => n.params.meta.kind === 'digest'), 'the digest after the override ended', 45_000, 100);
    expect(digest.params.meta.reason).toBe('override_end');
    expect(Number(digest.params.meta.pending)).toBe(held.length);
    expect(awayAgent.heard.filter((n) => n.params.meta.todo_id && held.includes(n.params.meta.todo_id))).toEqual([]);
    const [seen] = await sql<{ presence_seen: string }[]>`select presence_seen from endpoints where id = ${away.id}`;
    expect(seen!.presence_seen).toBe('in');

    // Both instances are healthy and kept their sessions.
    for (const app of [a, b]) expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
    expect(b.services.sessions.all().map((s) => s.id)).toEqual(expect.arrayContaining([f.onB.sessionId, awayAgent.sessionId]));

    console.info(
      `[faults] postgres restart: pg_ctl restart -m fast took ${restartEnded - restartStarted} ms; ${failureSummary(load.records)}; ` +
        `longest gap between acknowledged pushes A ${longestGap(load.records, 'a')} ms, B ${longestGap(load.records, 'b')} ms; ` +
        `worst push-to-doorbell across instances A→B ${worstToB} ms, B→A ${worstToA} ms; ` +
        `digest ${digest.at - outUntil.getTime()} ms after the override ended; 2×40 health checks per instance after it, slowest ${worstProbe} ms; ${errorLines(startedAt)}`,
    );
  });

  it('after 5 s with the database down, the same holds: nothing lost or doubled, every cross-instance doorbell rings', async () => {
    const f = await fixture('outage');
    const startedAt = Date.now();
    const load = produce(f, 'outage');
    const busy = hammer();
    await sleep(1000);
    const downAt = Date.now();
    const startAgain = await stopClusterForAWhile(cluster);
    await sleep(5000);
    await startAgain();
    const upAt = Date.now();
    // Until every producer has had two pushes acknowledged since the database came back.
    await waitFor(
      () => ['load0', 'load1', 'load2', 'load3', 'ringA', 'ringB'].every((p) => load.records.filter((r) => r.key.includes(`-${p}-`) && r.settledAt! > upAt).length >= 2),
      'every producer to get through again',
      60_000,
      50,
    );
    await Promise.all([load.stop(), busy.stop()]);
    const worstProbe = await expectEveryConnectionAnswers();

    await expectNothingLostOrDoubled('outage', load.records);
    const worstToB = await expectEveryRingerTodoRung(load.records, 'ringB', f.onB);
    const worstToA = await expectEveryRingerTodoRung(load.records, 'ringA', f.onA);
    for (const app of [a, b]) expect((await fetch(`${app.url}/healthz`)).status).toBe(200);

    const firstAfter = (via: 'a' | 'b') => Math.min(...load.records.filter((r) => r.via === via && r.settledAt! > upAt).map((r) => r.settledAt!)) - upAt;
    console.info(
      `[faults] postgres down ${upAt - downAt} ms: ${failureSummary(load.records)}; first acknowledged push after the start ` +
        `A +${firstAfter('a')} ms, B +${firstAfter('b')} ms; worst push-to-doorbell across instances A→B ${worstToB} ms, B→A ${worstToA} ms; ` +
        `2×40 health checks per instance after it, slowest ${worstProbe} ms; ` +
        `${errorLines(startedAt)}`,
    );
  });
});
