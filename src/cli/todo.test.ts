import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { vend, type TestApp, type Vended } from '../../test/support/fixtures.ts';
import { claimTodo, failTodo } from '../store/todos/index.ts';
import { main } from './main.ts';

// `switchboard todo` show, cancel, retry, the push options and paging, run in-process against a
// real server (the style of cli.test.ts).

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let home: string;
let env: Record<string, string>;
let ep: Vended;

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url);
  home = await mkdtemp(join(tmpdir(), 'sbcli-todo-'));
  const { token } = await humanWithToken(db.sql);
  env = { SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: token };
  ep = await vend(apiCaller(app.url, token), { name: 'cli-ops', queues: ['inbox'] });
});
afterAll(async () => {
  await app.stop();
  await db.drop();
});

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(['node', 'switchboard', ...args], {
    io: { out: (t) => void (out += t), err: (t) => void (err += t) },
    env: { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), ...env },
    readStdin: async () => '',
    stdinIsTty: false,
  });
  return { code, out, err };
}

async function pushed(...args: string[]): Promise<string> {
  app.clock.advance(1000);
  const r = await run(['todo', 'push', ep.slug, ...args, '--json']);
  expect(r.code, r.err).toBe(0);
  return JSON.parse(r.out).id as string;
}

const agent = async () => {
  const [row] = await db.sql<{ agent_id: string }[]>`select agent_id from endpoints where id = ${ep.id}`;
  return { endpointId: ep.id, owner: `agent:${row!.agent_id}`, queues: ['inbox'] };
};

describe('switchboard todo', () => {
  it('push --delay --priority --max-attempts, then show prints every field, the payload and the result', async () => {
    const id = await pushed('Later', '--delay', '10m', '--priority', '7', '--max-attempts', '3', '--payload', '{"pr":1}');
    const due = new Date(app.clock.now().getTime() + 600_000).toISOString().replace('.000', '');
    const shown = await run(['todo', 'show', ep.slug, id]);
    expect(shown.code, shown.err).toBe(0);
    expect(shown.out).toContain(`id:            ${id}\n`);
    expect(shown.out).toContain(`state:         pending (due ${due})\n`);
    expect(shown.out).toContain('priority:      7\n');
    expect(shown.out).toContain('attempt:       0/3\n');
    expect(shown.out).toContain('payload:\n{\n  "pr": 1\n}\nresult:\nnull\n');
    const json = JSON.parse((await run(['todo', 'show', ep.slug, id, '--json'])).out);
    expect(json).toMatchObject({ id, priority: 7, max_attempts: 3, run_at: due, dead: false, payload: { pr: 1 } });
  });

  it('cancel says what it left; a second cancel exits 1 with the conflict on one line', async () => {
    const id = await pushed('Doomed');
    expect(await run(['todo', 'cancel', ep.slug, id])).toMatchObject({ code: 0, out: `Canceled ${id} (was pending).\n` });
    const again = await run(['todo', 'cancel', ep.slug, id]);
    expect(again).toMatchObject({ code: 1, out: '' });
    expect(again.err).toMatch(/^switchboard: .*already canceled.*\(conflict\)\n$/);
  });

  it('retry puts a dead letter back; list --state dead shows it before and not after', async () => {
    const id = await pushed('Fragile', '--max-attempts', '1');
    const a = await agent();
    await claimTodo(db.sql, a, id, 60, app.clock.now());
    await failTodo(db.sql, a, id, { error: 'boom' }, app.clock.now());
    const dead = await run(['todo', 'list', ep.slug, '--state', 'dead']);
    expect(dead.out).toMatch(new RegExp(`^${id}\\s+inbox\\s+failed \\(dead\\)\\s+1/1`, 'm'));
    expect(await run(['todo', 'retry', ep.slug, id])).toMatchObject({ code: 0, out: `${id} is pending again (attempt 0/1).\n` });
    expect((await run(['todo', 'list', ep.slug, '--state', 'dead'])).out).toBe('No todos.\n');
    const twice = await run(['todo', 'retry', ep.slug, id]);
    expect(twice.code).toBe(1);
    expect(twice.err).toMatch(/is pending; only a failed todo .*\(conflict\)/);
  });

  it('list --limit prints the command for the next page; following it reaches the end', async () => {
    const seen: string[] = [];
    let args = ['todo', 'list', ep.slug, '--limit', '2'];
    for (let pages = 0; pages < 10; pages++) {
      const r = await run(args);
      expect(r.code, r.err).toBe(0);
      seen.push(...[...r.out.matchAll(/^(td_\S+)/gm)].map((m) => m[1]!));
      const more = /^More: switchboard todo list \S+ --cursor (\S+)$/m.exec(r.out);
      if (!more) break;
      args = ['todo', 'list', ep.slug, '--limit', '2', '--cursor', more[1]!];
    }
    const all = JSON.parse((await run(['todo', 'list', ep.slug, '--limit', '200', '--json'])).out) as { todos: { id: string }[]; next_cursor: null };
    expect(all.next_cursor).toBeNull();
    expect(seen).toEqual(all.todos.map((t) => t.id));
    expect(seen.length).toBeGreaterThan(2);
  });

  it('refuses bad options as usage mistakes (2), whether the CLI (a non-number priority) or the server (a bad delay or cursor) found them, naming the flag', async () => {
    expect((await run(['todo', 'push', ep.slug, 'x', '--priority', 'high'])).code).toBe(2);
    expect((await run(['todo', 'push', ep.slug, 'x', '--max-attempts', '1.5'])).code).toBe(2);
    const delay = await run(['todo', 'push', ep.slug, 'x', '--delay', 'soon']);
    expect(delay.code).toBe(2);
    expect(delay.err).toMatch(/^switchboard: --delay: .*\(invalid_argument\)\n$/);
    const cursor = await run(['todo', 'list', ep.slug, '--cursor', 'nope']);
    expect(cursor.code).toBe(2);
    expect(cursor.err).toMatch(/^switchboard: --cursor: .*\(invalid_argument\)\n$/);
    expect((await run(['todo', 'show', ep.slug, 'td_00000000-0000-4000-8000-000000000000'])).err).toMatch(/\(not_found\)/);
  });
});
