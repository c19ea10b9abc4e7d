import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { humanWithToken } from '../../test/support/app.ts';
import { main } from '../cli/main.ts';
import {
  api,
  apiStrict,
  app,
  caller,
  clock,
  createHook,
  db,
  expectSigned,
  listHooks,
  owner,
  push,
  signatureEntries,
  target,
  until,
  useNotifyHooksSuite,
  vend,
  verifiedBy,
} from '../../test/support/notify-hooks.ts';

// Notify hooks end to end: managing hooks over the API and the CLI, and secret rotation.

useNotifyHooksSuite();

// ---------------------------------------------------------------------------------------------

describe('managing hooks over the API', () => {
  it('create answers 201 with a whsec_ secret shown once; the list never shows it', async () => {
    const e = await vend();
    const t = target();
    const created = await createHook(e, { url: `${t.url}?token=query-secret` });
    expect(created).toMatchObject({
      hook_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      queues: [],
      ignore_presence: false,
      enabled: true,
      disabled_reason: null,
      consecutive_failures: 0,
      last_attempt_at: null,
      signing_secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    expect(Buffer.from(created.signing_secret.slice(6), 'base64')).toHaveLength(32);
    const r = await api('GET', `/api/v1/endpoints/${e.slug}/hooks`);
    expect(r.status).toBe(200);
    expect(r.json.ceiling).toEqual({ max: 5, used: 1 });
    expect(r.json.hooks).toHaveLength(1);
    expect(r.json.hooks[0].signing_secret).toBeUndefined();
    expect(r.json.hooks[0].url.startsWith(`${t.url}?`)).toBe(true);
    expect(r.json.hooks[0].url).toMatch(/redacted/);
    expect(r.text).not.toContain(created.signing_secret.slice(6));
    expect(r.text).not.toContain('query-secret');
    // By id too: the endpoint id works as the ref.
    expect((await api('GET', `/api/v1/endpoints/${e.id}/hooks`)).json.hooks[0].hook_id).toBe(created.hook_id);
  });

  it('refuses user info, a URL over 2048 bytes, an unknown queue and unknown fields', async () => {
    const e = await vend();
    const t = target();
    const withUser = t.url.replace('http://', 'http://user:pass@');
    for (const [body, field, message] of [
      [{ url: withUser }, 'url', /user name or password/],
      [{ url: `${t.url}/${'a'.repeat(2048)}` }, 'url', /at most 2048 bytes/],
      [{ url: 'http://10.1.2.3/hook' }, 'url', /not a public address/],
      [{ url: t.url, queues: ['elsewhere'] }, 'queues', /"elsewhere" is not one of endpoint/],
      [{}, 'url', /required/],
    ] as const) {
      const r = await api('POST', `/api/v1/endpoints/${e.slug}/hooks`, body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.json).toMatchObject({ code: 'invalid_argument', field });
      expect(r.json.error).toMatch(message);
    }
    expect((await api('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: t.url, secret: 'mine' })).status).toBe(400);
    expect((await listHooks(e)).hooks).toEqual([]);
  });

  it('refuses a URL on this server itself (its base URL or listen address): a hook must not feed its own ingest', async () => {
    const e = await vend();
    const own = new URL(app.url);
    for (const url of [`${app.url}/webhooks/w/anything`, `http://localhost:${own.port}/webhooks/w/x`]) {
      const r = await api('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url });
      expect(r.status, url).toBe(400);
      expect(r.json).toMatchObject({ code: 'invalid_argument', field: 'url' });
      expect(r.json.error).toMatch(/points at this Switchboard server/);
    }
    expect((await listHooks(e)).hooks).toEqual([]);
  });

  it('without the test flags: https is required and every non-public address class is refused naming url', async () => {
    const e = await vend();
    const http = await apiStrict('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: 'http://93.184.216.34/hook' });
    expect(http.status).toBe(400);
    expect(http.json).toMatchObject({ code: 'invalid_argument', field: 'url', error: 'url: must use https' });
    for (const host of ['127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '[::1]', '[fe80::1]', '[fc00::1]', '[::ffff:127.0.0.1]', '224.0.0.1', 'localhost']) {
      const r = await apiStrict('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: `https://${host}/hook` });
      expect(r.status, host).toBe(400);
      expect(r.json, host).toMatchObject({ code: 'invalid_argument', field: 'url', error: expect.stringMatching(/not a public address/) });
    }
    expect((await listHooks(e)).hooks).toEqual([]);
  });

  it('without the test flags: IPv6 transition prefixes and ports other than 80/443 are refused at create, naming url', async () => {
    const e = await vend();
    for (const host of ['[::127.0.0.1]', '[::ffff:93.184.216.34]', '[64:ff9b::a9fe:a9fe]', '[64:ff9b:1::a00:1]', '[2002:7f00:1::1]', '[2001:0:4136:e378:8000:63bf:80ff:fffe]']) {
      const r = await apiStrict('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: `https://${host}/hook` });
      expect(r.status, host).toBe(400);
      expect(r.json, host).toMatchObject({ code: 'invalid_argument', field: 'url', error: expect.stringMatching(/not a public address/) });
    }
    for (const url of ['https://93.184.216.34:8443/hook', 'https://[2606:4700::6810:84e5]:22/']) {
      const r = await apiStrict('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url });
      expect(r.status, url).toBe(400);
      expect(r.json, url).toMatchObject({ code: 'invalid_argument', field: 'url', error: expect.stringMatching(/^url: port \d+ is not allowed/) });
    }
    expect((await listHooks(e)).hooks).toEqual([]);
  });

  it('stops at the ceiling: 5 by default, SWITCHBOARD_NOTIFY_HOOK_MAX otherwise; over answers 409 resource_exhausted', async () => {
    const e = await vend();
    for (let i = 0; i < 5; i++) await createHook(e, { url: target().url });
    const over = await api('POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: target().url });
    expect(over.status).toBe(409);
    expect(over.json).toMatchObject({ code: 'resource_exhausted', max: 5, used: 5 });
    expect((await listHooks(e)).ceiling).toEqual({ max: 5, used: 5 });

    // The strict instance is configured with SWITCHBOARD_NOTIFY_HOOK_MAX=1 (a public https URL; nothing is pushed there).
    const f = await vend();
    expect((await apiStrict('POST', `/api/v1/endpoints/${f.slug}/hooks`, { url: 'https://93.184.216.34/hook' })).status).toBe(201);
    const second = await apiStrict('POST', `/api/v1/endpoints/${f.slug}/hooks`, { url: 'https://93.184.216.34/other' });
    expect(second.status).toBe(409);
    expect(second.json).toMatchObject({ code: 'resource_exhausted', max: 1, used: 1 });
    expect((await apiStrict('GET', `/api/v1/endpoints/${f.slug}/hooks`)).json.ceiling).toEqual({ max: 1, used: 1 });
  });

  it("a foreign human gets 404 on another's hooks routes and changes nothing", async () => {
    const e = await vend();
    const h = await createHook(e, { url: target().url });
    const foreign = caller(app, (await humanWithToken(db.sql)).token);
    const [before] = await db.sql`select secret, rotated_at from notify_hooks where id = ${h.hook_id}`;
    for (const [method, path, body] of [
      ['GET', `/api/v1/endpoints/${e.slug}/hooks`, undefined],
      ['POST', `/api/v1/endpoints/${e.slug}/hooks`, { url: target().url }],
      ['POST', `/api/v1/hooks/${h.hook_id}/rotate`, undefined],
      ['DELETE', `/api/v1/hooks/${h.hook_id}`, undefined],
    ] as const) {
      const r = await foreign(method, path, body);
      expect(r.status, `${method} ${path}`).toBe(404);
      expect(r.json.code).toBe('not_found');
    }
    const [after] = await db.sql`select secret, rotated_at from notify_hooks where id = ${h.hook_id}`;
    expect(after).toEqual(before);
    expect((await listHooks(e)).hooks.map((x) => x.hook_id)).toEqual([h.hook_id]);
    // The owner can delete it; then it is gone.
    const del = await api('DELETE', `/api/v1/hooks/${h.hook_id}`);
    expect(del.status).toBe(200);
    expect(del.json).toEqual({ hook_id: h.hook_id, deleted: true });
    expect((await listHooks(e)).hooks).toEqual([]);
    expect((await api('DELETE', `/api/v1/hooks/${h.hook_id}`)).status).toBe(404);
  });
});

describe('rotation', () => {
  it('signs with both secrets for 24 hours after a rotation, then with the new one only', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    const rotated = await api('POST', `/api/v1/hooks/${h.hook_id}/rotate`);
    expect(rotated.status).toBe(200);
    const next: string = rotated.json.signing_secret;
    expect(next).toMatch(/^whsec_/);
    expect(next).not.toBe(h.signing_secret);
    expect(JSON.stringify((await listHooks(e)).hooks)).not.toContain(next.slice(6));

    await push(e, 'during the grace');
    await until(() => t.got().length === 1, 'the first notification');
    const during = t.got()[0]!;
    expect(signatureEntries(during)).toHaveLength(2);
    expect(await verifiedBy(during, h.signing_secret)).toBe(1);
    expect(await verifiedBy(during, next)).toBe(1);

    clock.advance(24 * 3_600_000);
    await push(e, 'after the grace');
    await until(() => t.got().length === 2, 'the second notification');
    const after = t.got()[1]!;
    expect(signatureEntries(after)).toHaveLength(1);
    expect(await verifiedBy(after, next)).toBe(1);
    expect(await verifiedBy(after, h.signing_secret)).toBe(0);
  });
});

describe('switchboard hook (CLI)', () => {
  it('create prints the secret once; list shows the hook and its health, never the secret', async () => {
    const home = await mkdtemp(join(tmpdir(), 'sbhook-'));
    const run = async (args: string[]) => {
      let out = '';
      let err = '';
      const code = await main(['node', 'switchboard', ...args], {
        io: { out: (s) => void (out += s), err: (s) => void (err += s) },
        env: { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), SWITCHBOARD_DATABASE_URL: db.url, SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: owner.token },
        readStdin: async () => '',
        stdinIsTty: false,
      });
      return { code, out, err };
    };
    const e = await vend();
    const t = target();
    clock.advance(4000);
    const created = await run(['hook', 'create', e.slug, '--url', t.url, '--queue', 'reviews']);
    expect(created.err).toBe('');
    expect(created.code).toBe(0);
    const m = /^Created notify hook ([0-9a-f-]{36}) → (\S+)\n {2}Signing secret {2}(whsec_\S+)\nShown once\./.exec(created.out);
    expect(m, created.out).not.toBeNull();
    const [, hookId, url, secret] = m!;
    expect(url).toBe(t.url);

    const list = await run(['hook', 'list', e.slug]);
    expect(list.code).toBe(0);
    expect(list.out.split('\n')[0]).toMatch(/^ID\s+URL\s+QUEUES\s+STATE\s+LAST\s+FAILURES$/);
    expect(list.out).toMatch(new RegExp(`${hookId}\\s+${t.url.replace(/[.]/g, '\\.')}\\s+reviews\\s+enabled\\s+never\\s+0`));
    expect(list.out).not.toContain('whsec_');
    const json = await run(['hook', 'list', e.slug, '--json']);
    expect(JSON.parse(json.out)).toMatchObject({ ceiling: { max: 5, used: 1 }, hooks: [{ hook_id: hookId, queues: ['reviews'] }] });
    expect(json.out).not.toContain(secret!.slice(6));

    // The printed secret is the one that signs.
    await push(e, 'for the CLI hook');
    await until(() => t.got().length === 1, 'the notification');
    await expectSigned(t.got(), secret!);
  });
});