import { randomUUID } from 'node:crypto';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, startTestApp } from '../../test/support/app.ts';
import { main } from '../cli/main.ts';
import { ManualClock } from '../lib/clock.ts';
import { githubIssueOpened, githubPullRequestOpened, githubPush } from '../domain/ingest/fixtures.testkit.ts';
import {
  app,
  call,
  capture,
  connect,
  counts,
  db,
  github,
  KEY,
  type Minted,
  neverLogged,
  ownerToken,
  tokenOf,
  seedForgeWebhooks,
  useIngestSuite,
  vend,
} from '../../test/support/ingest.ts';

// Webhook ingestion end to end: the agent verbs, running without an encryption key, and the CLI.

useIngestSuite();

let gh: Minted;

beforeAll(async () => void ({ gh } = await seedForgeWebhooks()));

describe('agent verbs', () => {
  const WEBHOOK_VERBS = ['create_webhook', 'list_webhooks', 'rotate_webhook', 'delete_webhook'];

  it('are granted only when vended with them', async () => {
    const plain = await connect(await vend());
    expect((await plain.listTools()).tools.map((t) => t.name)).not.toContain('create_webhook');
    expect(await call(plain, 'create_webhook', { source_type: 'generic', target_queue: 'inbox' })).toEqual({ error: expect.stringMatching(/^forbidden: /) });
  });

  it('create_webhook within the ceiling (default 1) and the scope; list, rotate and delete their own only', async () => {
    const e = await vend(['reviews', 'inbox'], { verbs: ['list_todos', 'claim', 'claim_next', ...WEBHOOK_VERBS] });
    const agent = await connect(e);
    expect((await agent.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(WEBHOOK_VERBS));

    const outside = await call(agent, 'create_webhook', { source_type: 'github', target_queue: 'payments' });
    expect(outside).toEqual({ error: expect.stringMatching(/^forbidden: target_queue/) });
    expect(await call(agent, 'create_webhook', { source_type: 'github', target_queue: 'reviews', trust_mode: 'token' })).toEqual({
      error: expect.stringMatching(/^invalid_argument: /),
    });
    expect(await call(agent, 'create_webhook', { source_type: 'stripe', target_queue: 'reviews' })).toEqual({
      error: expect.stringMatching(/^invalid_argument: /),
    });

    const created = await call(agent, 'create_webhook', { source_type: 'github', target_queue: 'reviews' });
    neverLogged.add(tokenOf(created.ingest_url)).add(created.signing_secret);
    expect(created).toMatchObject({ source_type: 'github', trust_mode: 'signed', target_queue: 'reviews', created_by: 'agent' });
    expect(created.signing_secret).toMatch(/^whsec_/);
    const delivered = await github(created, 'pull_request', githubPullRequestOpened, created.signing_secret);
    expect(delivered.status).toBe(202);
    expect(delivered.json.todos[0]).toMatchObject({ endpoint_id: e.id, queue: 'reviews', created: true });

    const second = await call(agent, 'create_webhook', { source_type: 'generic', target_queue: 'inbox' });
    expect(second).toEqual({ error: expect.stringMatching(/^forbidden: .*limit/) });
    expect((await db.sql`select count(*)::int as n from webhooks where endpoint_id = ${e.id}`)[0]!.n).toBe(1);

    const listed = await call(agent, 'list_webhooks');
    expect(listed.ceiling).toEqual({ max: 1, used: 1, queues: ['reviews', 'inbox'] });
    expect(listed.webhooks).toHaveLength(1);
    expect(listed.webhooks[0]).toMatchObject({ webhook_id: created.webhook_id, source_type: 'github' });
    expect(JSON.stringify(listed)).not.toContain(created.signing_secret);
    expect(JSON.stringify(listed)).not.toContain(tokenOf(created.ingest_url));

    // Another endpoint's webhook answers like a missing one.
    expect(await call(agent, 'rotate_webhook', { webhook_id: gh.webhook_id })).toEqual({ error: expect.stringMatching(/^not_found: /) });
    expect(await call(agent, 'delete_webhook', { webhook_id: gh.webhook_id })).toEqual({ error: expect.stringMatching(/^not_found: /) });
    expect(await call(agent, 'delete_webhook', { webhook_id: 'not-a-uuid' })).toEqual({ error: expect.stringMatching(/^invalid_argument: /) });
    expect((await db.sql`select count(*)::int as n from webhooks where id = ${gh.webhook_id}`)[0]!.n).toBe(1);

    const rotated = await call(agent, 'rotate_webhook', { webhook_id: created.webhook_id });
    neverLogged.add(tokenOf(rotated.ingest_url)).add(rotated.signing_secret);
    expect(rotated.signing_secret).not.toBe(created.signing_secret);
    expect((await github(created, 'issues', githubIssueOpened, created.signing_secret)).status).toBe(404);
    expect((await github(rotated, 'issues', githubIssueOpened, created.signing_secret)).status).toBe(401);
    expect((await github(rotated, 'issues', githubIssueOpened, rotated.signing_secret)).status).toBe(202);

    expect(await call(agent, 'delete_webhook', { webhook_id: created.webhook_id })).toEqual({ webhook_id: created.webhook_id, deleted: true });
    expect((await github(rotated, 'issues', githubIssueOpened, rotated.signing_secret)).status).toBe(404);
    expect((await call(agent, 'list_webhooks')).ceiling).toMatchObject({ max: 1, used: 0 });
    // The slot is free again.
    const again = await call(agent, 'create_webhook', { source_type: 'generic', target_queue: 'inbox' });
    neverLogged.add(tokenOf(again.ingest_url));
    expect(again).toMatchObject({ trust_mode: 'token' });
  });
});

describe('without SWITCHBOARD_SECRET_ENCRYPTION_KEY', () => {
  it('stores new secrets as plain:, warns at startup, and answers 503 for a secret sealed under a key it lacks', async () => {
    let plainLog = '';
    const plain = await startTestApp(db.url, new ManualClock('2026-02-01T00:00:00Z'), { log: capture((t) => void (plainLog += t)) });
    try {
      // Signed webhooks exist (sealed by the keyed instance): the startup warning names the fix.
      expect(plainLog).toContain('webhook signing secrets are stored unencrypted');
      const e = await vend(['reviews']);
      const w = await apiCaller(plain.url, ownerToken)('POST', `/api/v1/endpoints/${e.slug}/webhooks`, { source_type: 'github' });
      expect(w.status).toBe(201);
      neverLogged.add(tokenOf(w.json.ingest_url)).add(w.json.signing_secret);
      expect(w.json.ingest_url.startsWith(`${plain.url}/webhooks/w/`)).toBe(true);
      const [row] = await db.sql`select signing_secret from webhooks where id = ${w.json.webhook_id}`;
      expect(row!.signing_secret).toBe(`plain:${w.json.signing_secret}`);

      expect((await github(w.json, 'issues', githubIssueOpened, w.json.signing_secret)).status).toBe(202);
      // A keyed instance refuses a plain: secret as it stands, and reseals it (bound to its row) when it starts.
      const onKeyed = () => github({ ingest_url: w.json.ingest_url.replace(plain.url, app.url) }, 'push', githubPush, w.json.signing_secret);
      expect((await onKeyed()).status).toBe(503);
      const restarted = await startTestApp(db.url, new ManualClock('2026-02-01T00:00:00Z'), { env: { SWITCHBOARD_SECRET_ENCRYPTION_KEY: KEY } });
      await restarted.stop();
      expect((await db.sql`select signing_secret from webhooks where id = ${w.json.webhook_id}`)[0]!.signing_secret).toMatch(/^v2:/);
      expect((await onKeyed()).status).toBe(202);

      // A secret sealed under a key this instance does not have is as good as absent: 503, not a 500.
      const mark = plainLog.length;
      const before = await counts();
      const sealed = await github({ ingest_url: gh.ingest_url.replace(app.url, plain.url) }, 'issues', githubIssueOpened, gh.signing_secret!);
      expect(sealed.status).toBe(503);
      expect(sealed.json).toMatchObject({ code: 'unavailable', error: expect.stringMatching(/webhook not configured/) });
      expect(await counts()).toEqual(before);
      const lines = plainLog.slice(mark);
      expect(lines).not.toContain('unhandled error');
      expect(lines).toContain('SWITCHBOARD_SECRET_ENCRYPTION_KEY');
    } finally {
      await plain.stop();
    }
    for (const s of neverLogged) expect(plainLog).not.toContain(s);
  });
});

describe('switchboard webhook / events CLI', () => {
  it('webhook create prints the URL and secret once; list and events list show the delivery, never the secret', async () => {
    const home = await mkdtemp(join(tmpdir(), 'sbwh-'));
    const owner = await humanWithToken(db.sql);
    const env = { HOME: home, XDG_CONFIG_HOME: join(home, '.config'), SWITCHBOARD_URL: app.url, SWITCHBOARD_TOKEN: owner.token };
    const run = async (...args: string[]) => {
      let out = '';
      let err = '';
      const code = await main(['node', 'switchboard', ...args], {
        io: { out: (t) => void (out += t), err: (t) => void (err += t) },
        env,
        readStdin: async () => '',
        stdinIsTty: false,
      });
      return { code, out, err };
    };
    const e = await vend(['reviews', 'inbox'], {}, apiCaller(app.url, owner.token));

    const created = await run('webhook', 'create', e.slug, '--source', 'github', '--queue', 'reviews');
    expect(created).toMatchObject({ code: 0, err: '' });
    const id = /Created github webhook ([0-9a-f-]{36}) → queue reviews \(signed\)\./.exec(created.out)![1]!;
    const url = /Ingest URL {6}(\S+)/.exec(created.out)![1]!;
    const secret = /Signing secret {2}(whsec_\S+)/.exec(created.out)![1]!;
    neverLogged.add(tokenOf(url)).add(secret);
    expect(url.startsWith(`${app.baseUrl}/webhooks/w/`)).toBe(true);
    expect(created.out).toContain('Shown once');

    const delivery = randomUUID();
    const d = await github({ ingest_url: url }, 'issues', githubIssueOpened, secret, delivery);
    expect(d.status).toBe(202);

    const list = await run('webhook', 'list', e.slug);
    expect(list.code).toBe(0);
    expect(list.out.split('\n')[0]).toMatch(/^ID\s+SOURCE\s+TRUST\s+QUEUE\s+URL\s+LAST DELIVERY$/);
    expect(list.out).toMatch(new RegExp(`${id}\\s+github\\s+signed\\s+reviews\\s+\\S+${tokenOf(url).slice(0, 6)}…`));
    expect(list.out).not.toContain(secret);
    expect(list.out).not.toContain(tokenOf(url));
    const listJson = await run('webhook', 'list', e.slug, '--json');
    expect(JSON.parse(listJson.out).webhooks[0]).toMatchObject({ webhook_id: id, source_type: 'github', last_delivery_at: expect.any(String) });

    const events = await run('events', 'list', e.slug);
    expect(events.code).toBe(0);
    expect(events.out.split('\n')[0]).toMatch(/^ID\s+RECEIVED\s+SOURCE\s+EVENT\s+TRUST\s+VERIFIED\s+TODO\s+BECAME$/);
    expect(events.out).toMatch(new RegExp(`github\\s+issues\\s+signed\\s+yes\\s+${d.json.id}\\s+routed: default: queue reviews`));
    const eventsJson = JSON.parse((await run('events', 'list', e.slug, '--json', '--limit', '5')).out);
    expect(eventsJson.events[0]).toMatchObject({ external_id: delivery, verified: true, todo_id: d.json.id, headers: { 'x-hub-signature-256': '«redacted»' } });

    const generic = await run('webhook', 'create', e.slug, '--source', 'generic', '--queue', 'inbox');
    neverLogged.add(tokenOf(/Ingest URL {6}(\S+)/.exec(generic.out)![1]!));
    expect(generic.out).not.toContain('Signing secret');
    expect(generic.out).toContain('the credential');
    const bad = await run('webhook', 'create', e.slug, '--source', 'github', '--queue', 'nope');
    // The server's invalid_argument, named by the flag the user typed: a usage error, exit 2.
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--queue: "nope" is not one of endpoint/);
    expect(bad.err).not.toContain('target_queue');
  });
});