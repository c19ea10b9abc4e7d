import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { vend, type TestApp } from '../../test/support/fixtures.ts';
import { main } from './main.ts';
import { sinceArg } from './presence-history.ts';

// `switchboard endpoint presence REF --history` against a real server: the presence changes the
// operator's clock-out and clock-in and a shift's start left, newest first.

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let home: string;
let owner: { id: string; handle: string; token: string };

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url);
  owner = await humanWithToken(db.sql);
  home = await mkdtemp(join(tmpdir(), 'sb-presence-history-'));
});
afterAll(async () => {
  await app?.stop();
  await db?.drop();
});

async function run(args: string[]) {
  let out = '';
  let err = '';
  const code = await main(['node', 'switchboard', ...args], {
    io: { out: (t) => void (out += t), err: (t) => void (err += t) },
    env: { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: owner.token },
    readStdin: async () => '',
    stdinIsTty: false,
  });
  return { code, out, err };
}

describe('switchboard endpoint presence REF --history', () => {
  it('prints AT, FROM, TO, SOURCE, BY, UNTIL newest first, and --json the API answer', async () => {
    const api = apiCaller(app.url, owner.token);
    // Monday 2026-01-05 09:00 (the test clock's start): a shift, clocked out over it, then back.
    app.clock.set('2026-01-05T08:00:00Z');
    const e = await vend(api, { name: 'historian', queues: ['inbox'] });
    expect((await run(['endpoint', 'presence', e.slug, '--history'])).out).toBe(`No presence changes of ${e.slug} since 2025-12-29T08:00:00Z.\n`);
    expect((await run(['endpoint', 'shift', e.slug, 'Mon-Fri 09:00-17:00'])).code).toBe(0);
    app.clock.set('2026-01-05T09:00:30Z');
    await app.services.presence.evaluate();
    app.clock.set('2026-01-05T10:00:00Z');
    expect((await run(['endpoint', 'clock-out', e.slug, '--until', '2026-01-05T11:00:00Z'])).code).toBe(0);
    app.clock.set('2026-01-05T10:30:00Z');
    expect((await run(['endpoint', 'clock-in', e.slug])).code).toBe(0);

    const listed = await run(['endpoint', 'presence', e.slug, '--history']);
    expect(listed.code, listed.err).toBe(0);
    const by = `operator:${owner.handle}`;
    expect(listed.out.split('\n').map((l) => l.trim().split(/\s{2,}/))).toEqual([
      ['AT', 'FROM', 'TO', 'SOURCE', 'BY', 'UNTIL'],
      ['2026-01-05T10:30:00Z', 'out', 'in', 'operator', by, '2026-01-05T17:00:00Z'],
      ['2026-01-05T10:00:00Z', 'in', 'out', 'operator', by, '2026-01-05T11:00:00Z'],
      ['2026-01-05T09:00:30Z', 'out', 'in', 'shift', 'shift', '2026-01-05T17:00:00Z'],
      ['2026-01-05T08:00:00Z', 'in', 'out', 'shift', by, '2026-01-05T09:00:00Z'],
      [''],
    ]);

    const json = JSON.parse((await run(['endpoint', 'presence', e.id, '--history', '--json', '--limit', '2'])).out);
    expect(json).toEqual({
      since: '2025-12-29T10:30:00Z',
      changes: [
        { at: '2026-01-05T10:30:00Z', from: 'out', to: 'in', source: 'operator', by: `operator:${owner.id}`, by_handle: owner.handle, reason: 'operator', until: '2026-01-05T17:00:00Z' },
        { at: '2026-01-05T10:00:00Z', from: 'in', to: 'out', source: 'operator', by: `operator:${owner.id}`, by_handle: owner.handle, reason: 'operator', until: '2026-01-05T11:00:00Z' },
      ],
    });
    const since = await run(['endpoint', 'presence', e.slug, '--history', '--since', '2026-01-05T09:30:00Z']);
    expect(since.out.trim().split('\n')).toHaveLength(3);
  });

  it('refuses --history with --clear, --since or --limit without --history, a bad --since, and names --limit when the API refuses it', async () => {
    const e = await vend(apiCaller(app.url, owner.token), { name: 'refused', queues: ['inbox'] });
    for (const args of [['--history', '--clear'], ['--since', '2h'], ['--limit', '5'], ['--history', '--since', 'yesterday']]) {
      const r = await run(['endpoint', 'presence', e.slug, ...args]);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.out).toBe('');
    }
    const limit = await run(['endpoint', 'presence', e.slug, '--history', '--limit', '0']);
    expect(limit.code).not.toBe(0);
    expect(limit.err).toContain('--limit');
  });
});

describe('sinceArg', () => {
  it('reads an RFC 3339 time, or a duration back from now', () => {
    const now = new Date('2026-01-05T12:00:00Z');
    expect(sinceArg(undefined, now)).toBeUndefined();
    expect(sinceArg('2026-01-01T00:00:00+01:00', now)).toBe('2025-12-31T23:00:00.000Z');
    expect(sinceArg('48h', now)).toBe('2026-01-03T12:00:00.000Z');
    expect(() => sinceArg('2 days', now)).toThrow(/--since/);
  });
});
