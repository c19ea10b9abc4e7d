import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { userInfo } from 'node:os';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../src/lib/clock.ts';
import { createLoginLink } from '../src/store/web-sessions.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from './support/app.ts';
import { capturingLogger } from './support/doorbell-acks.ts';
import type { TestApp, TestDb } from './support/fixtures.ts';

/**
 * Audit lines: who vended and revoked endpoints, minted, rotated and deleted webhooks and notify
 * hooks, and signed in and out of the board; one access line per request. No secret in any line.
 */
let db: TestDb;
let app: TestApp;
let receiver: Server;
let receiverUrl: string;
const { log, lines } = capturingLogger();

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url, new ManualClock(new Date()), {
    log,
    env: { SWITCHBOARD_PUSH_ALLOW_HTTP: '1', SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '127.0.0.1/32' },
  });
  receiver = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
});
afterAll(async () => {
  await app?.stop();
  await new Promise((r) => receiver?.close(r));
  await db?.drop();
});

const audits = () => lines.filter((l) => l.audit);

describe('audit lines', () => {
  it('name the action, the human and the ids for every credential and integration change, and never a secret', async () => {
    const human = await humanWithToken(db.sql);
    const api = apiCaller(app.url, human.token);
    const by = `operator:${human.id}`;
    const secrets: string[] = [human.token];

    const vended = await api('POST', '/api/v1/endpoints', { name: 'audited', queues: ['reviews'] });
    expect(vended.status).toBe(201);
    const slug: string = vended.json.slug;
    const endpointId: string = vended.json.id;
    secrets.push(vended.json.token);

    const webhook = await api('POST', `/api/v1/endpoints/${slug}/webhooks`, { source_type: 'github' });
    expect(webhook.status).toBe(201);
    secrets.push(webhook.json.signing_secret, webhook.json.ingest_url);
    const webhookId: string = webhook.json.webhook_id;
    const rotated = await api('POST', `/api/v1/webhooks/${webhookId}/rotate`);
    expect(rotated.status).toBe(200);
    secrets.push(rotated.json.signing_secret, rotated.json.ingest_url);
    expect((await api('DELETE', `/api/v1/webhooks/${webhookId}`)).status).toBe(200);

    const hook = await api('POST', `/api/v1/endpoints/${slug}/hooks`, { url: receiverUrl });
    expect(hook.status).toBe(201);
    secrets.push(hook.json.signing_secret);
    const hookId: string = hook.json.hook_id;
    const hookRotated = await api('POST', `/api/v1/hooks/${hookId}/rotate`);
    secrets.push(hookRotated.json.signing_secret);
    expect((await api('DELETE', `/api/v1/hooks/${hookId}`)).status).toBe(200);

    expect((await api('POST', `/api/v1/endpoints/${slug}/revoke`)).status).toBe(200);

    const { token: link } = await createLoginLink(db.sql, human.handle, app.clock.now());
    secrets.push(link);
    const signIn = await fetch(`${app.url}/login/${link}`, { method: 'POST', redirect: 'manual' });
    expect(signIn.status).toBe(303);
    const cookie = /^sb_session=([^;]*)/.exec(signIn.headers.get('set-cookie')!)![0];
    secrets.push(cookie.slice('sb_session='.length));
    const page = await (await fetch(`${app.url}/`, { headers: { cookie } })).text();
    const csrf = /name="csrf_token" value="([0-9a-f]{64})"/.exec(page)![1]!;
    const signOut = await fetch(`${app.url}/logout`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: `csrf_token=${csrf}`,
    });
    expect(signOut.status).toBe(303);

    expect(audits().map((l) => [l.audit, l.by])).toEqual([
      ['endpoint.vend', by],
      ['webhook.create', by],
      ['webhook.rotate', by],
      ['webhook.delete', by],
      ['notify_hook.create', by],
      ['notify_hook.rotate', by],
      ['notify_hook.delete', by],
      ['endpoint.revoke', by],
      ['board.sign_in', by],
      ['board.sign_out', by],
    ]);
    expect(audits()[0]).toMatchObject({ slug, endpoint_id: endpointId, queues: ['reviews'] });
    expect(audits()[1]).toMatchObject({ webhook_id: webhookId, source_type: 'github' });
    expect(audits()[4]).toMatchObject({ hook_id: hookId });

    const everything = lines.map((l) => JSON.stringify(l)).join('\n');
    for (const secret of secrets.filter(Boolean)) expect(everything).not.toContain(secret);
  });

  it('come with one access line per request: method, route template, status and time', async () => {
    const before = lines.length;
    await fetch(`${app.url}/healthz`);
    await fetch(`${app.url}/login/not-a-real-link-token-0123456789`);
    const access = lines.slice(before).filter((l) => l.msg === 'http request');
    expect(access).toEqual([
      expect.objectContaining({ method: 'GET', route: '/healthz', status: 200, ms: expect.any(Number) }),
      expect.objectContaining({ method: 'GET', route: '/login/:token', status: expect.any(Number) }),
    ]);
    expect(JSON.stringify(access)).not.toContain('not-a-real-link-token');
  });

  it('are written by admin token create and revoke, on stderr, naming the OS user and never the token', async () => {
    const handle = (await humanWithToken(db.sql)).handle;
    const admin = (...args: string[]) =>
      promisify(execFile)(process.execPath, ['bin/switchboard.js', 'admin', ...args], {
        env: { PATH: process.env.PATH, HOME: process.env.HOME, SWITCHBOARD_DATABASE_URL: db.url, SWITCHBOARD_LOG_FORMAT: 'json' },
      });
    const auditsIn = (stderr: string) =>
      stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.audit);
    const created = await admin('token', 'create', handle, '--json');
    const minted = JSON.parse(created.stdout) as { id: string; token: string; prefix: string };
    const by = `admin:${userInfo().username}`;
    expect(auditsIn(created.stderr)).toEqual([
      expect.objectContaining({ audit: 'token.create', by, human: handle, token_id: minted.id, prefix: minted.prefix }),
    ]);
    expect(created.stderr).not.toContain(minted.token);
    const revoked = await admin('token', 'revoke', minted.id);
    expect(auditsIn(revoked.stderr)).toEqual([expect.objectContaining({ audit: 'token.revoke', by, token_id: minted.id, prefix: minted.prefix })]);
  });
});
