import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import { vend, type TestApp } from '../../test/support/fixtures.ts';
import { registerClient } from '../store/oauth/clients.ts';
import { createGrantWithCode } from '../store/oauth/grants.ts';
import { main } from './main.ts';

// `switchboard endpoint grants` and `revoke-grant` against a real server; the grant is set up
// through the store (the consent flow itself is test/oauth-*.test.ts's).

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let home: string;
let owner: { id: string; token: string };

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url);
  owner = await humanWithToken(db.sql);
  home = await mkdtemp(join(tmpdir(), 'sb-grants-'));
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

describe('switchboard endpoint grants / revoke-grant', () => {
  it('lists the endpoint\'s grants and revokes one by id; a bad id is refused before any request', async () => {
    const ep = await vend(apiCaller(app.url, owner.token), { name: 'granted', queues: ['inbox'] });
    expect((await run(['endpoint', 'grants', ep.slug])).out).toBe(`No OAuth grants on ${ep.slug}.\n`);

    const client = await registerClient(db.sql, { client_name: 'Cursor', redirect_uris: ['http://127.0.0.1:1/cb'] }, app.clock.now());
    const grantId = await createGrantWithCode(
      db.sql,
      { clientId: client.client_id, humanId: owner.id, endpointId: ep.id, resource: `${app.baseUrl}/mcp/${ep.slug}`, code: { plaintext: 'sbc_test', redirectUri: 'http://127.0.0.1:1/cb', challenge: 'x'.repeat(43), expiresAt: app.clock.now() } },
      app.clock.now(),
    );
    const listed = await run(['endpoint', 'grants', ep.slug]);
    expect(listed.code).toBe(0);
    expect(listed.out).toMatch(new RegExp(`^GRANT\\s+CLIENT\\s+GRANTED\\s+LAST USED\\n${grantId}\\s+Cursor\\s+\\S+\\s+never\\n$`));
    const json = JSON.parse((await run(['endpoint', 'grants', ep.slug, '--json'])).out) as { grants: { id: string; client_name: string }[] };
    expect(json.grants.map((g) => [g.id, g.client_name])).toEqual([[grantId, 'Cursor']]);

    const bad = await run(['endpoint', 'revoke-grant', ep.slug, 'nope']);
    expect(bad.code).not.toBe(0);
    expect(bad.err).toContain('is not a grant id');

    const revoked = await run(['endpoint', 'revoke-grant', ep.slug, grantId]);
    expect(revoked).toMatchObject({ code: 0, out: `Revoked grant ${grantId} of ${ep.slug}.\n` });
    expect((await run(['endpoint', 'grants', ep.slug])).out).toBe(`No OAuth grants on ${ep.slug}.\n`);
    const again = await run(['endpoint', 'revoke-grant', ep.slug, grantId]);
    expect(again.code).not.toBe(0);
    expect(again.err).toContain('no live grant');
  });
});

describe('switchboard auth grants / revoke-grant', () => {
  it('lists the human\'s API grants (browser logins) and revokes one; endpoint grants are not among them', async () => {
    expect((await run(['auth', 'grants'])).out).toBe('No API grants (logins with a token do not make one).\n');
    const client = await registerClient(db.sql, { client_name: 'switchboard CLI', redirect_uris: ['http://127.0.0.1:2/callback'] }, app.clock.now());
    const grantId = await createGrantWithCode(
      db.sql,
      { clientId: client.client_id, humanId: owner.id, endpointId: null, resource: `${app.baseUrl}/api`, code: { plaintext: 'sbc_api', redirectUri: 'http://127.0.0.1:2/callback', challenge: 'y'.repeat(43), expiresAt: app.clock.now() } },
      app.clock.now(),
    );
    const listed = await run(['auth', 'grants']);
    expect(listed.out).toMatch(new RegExp(`^GRANT\\s+CLIENT\\s+GRANTED\\s+LAST USED\\n${grantId}\\s+switchboard CLI\\s+\\S+\\s+never\\n$`));
    expect(await run(['auth', 'revoke-grant', grantId])).toMatchObject({ code: 0, out: `Revoked API grant ${grantId}.\n` });
    expect((await run(['auth', 'grants', '--json'])).out).toBe(`${JSON.stringify({ grants: [] }, null, 2)}\n`);
  });
});
