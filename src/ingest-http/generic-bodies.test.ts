import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { formBody } from '../domain/ingest/fixtures.testkit.ts';
import { counts, db, doorbellsFor, type Minted, type Notification, post, refused, seedForgeWebhooks, settle, todo, until, useIngestSuite, listener } from '../../test/support/ingest.ts';

// A generic webhook takes JSON and nothing else, whatever the content type says: an empty POST or
// text is a 400 naming `body` and changes nothing; JSON under any content type becomes a todo.

useIngestSuite();

let gen: Minted;
let bell: { client: Client; heard: Notification[] };

beforeAll(async () => {
  const seeded = await seedForgeWebhooks();
  gen = seeded.gen;
  bell = await listener(seeded.forge);
});

const rings = async (): Promise<number> => (await db.sql<{ n: number }[]>`select count(*)::int as n from doorbell_rings`)[0]!.n;

/** A refusal that stored nothing and rang nothing. */
async function refusedQuietly(body: string | Buffer, headers: Record<string, string>, error: string) {
  const [ringsBefore, heardBefore] = [await rings(), bell.heard.length];
  const { r } = await refused(400, 'invalid_argument', () => post(gen.ingest_url, body, headers));
  expect(r.json).toEqual({ code: 'invalid_argument', field: 'body', error });
  await settle();
  expect(await rings()).toBe(ringsBefore);
  expect(bell.heard).toHaveLength(heardBefore);
}

describe('generic webhook bodies', () => {
  it('an empty POST (no body, no content type): 400 naming body', async () => {
    await refusedQuietly(Buffer.alloc(0), {}, 'body: is empty; a delivery must be JSON');
    await refusedQuietly('', { 'content-type': 'application/json' }, 'body: is empty; a delivery must be JSON');
    await refusedQuietly(' \r\n', { 'content-type': 'application/json', 'x-event-type': 'build.failed' }, 'body: is empty; a delivery must be JSON');
  });

  it('text that is not JSON: 400 naming body, whatever the content type', async () => {
    await refusedQuietly('disk 93% full on db-1', { 'content-type': 'text/plain' }, 'body: is not valid JSON');
    await refusedQuietly('disk 93% full on db-1', { 'content-type': 'application/json' }, 'body: is not valid JSON');
    await refusedQuietly('{"title": "cut short"', { 'content-type': 'application/json' }, 'body: is not valid JSON');
    // Only GitHub and Gitea wrap their JSON in a form's payload field.
    await refusedQuietly(formBody('{"title":"wrapped"}'), { 'content-type': 'application/x-www-form-urlencoded' }, 'body: is not valid JSON');
  });

  it('JSON under a wrong content type (text/plain, curl -d\'s form type, none) still becomes a todo; the event keeps the type sent', async () => {
    for (const [type, n] of [['text/plain', 1], ['application/x-www-form-urlencoded', 2], ['', 3]] as const) {
      const before = await counts();
      const body = JSON.stringify({ title: `Nightly build ${n} failed`, build: 990 + n });
      // fetch labels a string body text/plain by itself; bytes go with no content type at all.
      const r = await post(gen.ingest_url, type ? body : Buffer.from(body), type ? { 'content-type': type } : {});
      expect(r.status, type).toBe(202);
      expect(r.json).toMatchObject({ created: 1, queue: 'inbox', trust_mode: 'token', verified: false });
      const t = await todo(r.json.id);
      expect(t).toMatchObject({ title: `Nightly build ${n} failed`, payload: { build: 990 + n }, source: 'generic' });
      const [ev] = await db.sql`select content_type from events where id = ${t.event_id}`;
      expect(ev!.content_type).toBe(type || null);
      expect(await counts()).toEqual({ todos: before.todos + 1, events: before.events + 1 });
    }
  });

  it('valid JSON as application/json: a todo with the title, payload and kind given, rung once', async () => {
    const body = JSON.stringify({ title: 'Certificate expires in 7 days', host: 'db-1.example.com' });
    const r = await post(gen.ingest_url, body, { 'content-type': 'application/json; charset=utf-8', 'x-event-type': 'cert.expiring', 'x-delivery-id': 'cert-db-1-7d' });
    expect(r.status).toBe(202);
    expect(await todo(r.json.id)).toMatchObject({ title: 'Certificate expires in 7 days', kind: 'cert.expiring', payload: { host: 'db-1.example.com' } });
    await until(() => doorbellsFor(bell.heard, r.json.id).length === 1, 'the generic doorbell');
  });

  it('a generic producer that says ping is not GitHub: its delivery is work', async () => {
    const r = await post(gen.ingest_url, '{"title":"ping from the monitor"}', { 'content-type': 'application/json', 'x-event-type': 'ping' });
    expect(r.status).toBe(202);
    expect(await todo(r.json.id)).toMatchObject({ title: 'ping from the monitor', kind: 'ping' });
  });

  it('the payload is the body as sent: numbers past a double\'s precision and trailing zeros kept exactly', async () => {
    const body = '{"title":"counter overflow","big":12345678901234567890,"ratio":1.10}';
    const r = await post(gen.ingest_url, body, { 'content-type': 'application/json' });
    expect(r.status).toBe(202);
    const [stored] = await db.sql<{ big: string; ratio: string }[]>`
      select payload->>'big' as big, payload->>'ratio' as ratio from todos where id = ${r.json.id}`;
    expect(stored).toEqual({ big: '12345678901234567890', ratio: '1.10' });
  });

  it('a number in exponent form is parsed first, never written out in full: 1e131071 is stored as null, as JSON.parse reads it', async () => {
    const body = '{"title":"exponents","huge":1e131071,"small":2.5e-3}';
    const r = await post(gen.ingest_url, body, { 'content-type': 'application/json' });
    expect(r.status).toBe(202);
    const [stored] = await db.sql<{ huge: unknown; small: string; payload_size: number }[]>`
      select payload->'huge' as huge, payload->>'small' as small, payload_size from todos where id = ${r.json.id}`;
    expect(stored).toEqual({ huge: null, small: '0.0025', payload_size: expect.any(Number) });
    expect(stored!.payload_size).toBeLessThan(200);
  });

  it('a body that is not valid UTF-8 still becomes a todo, its payload as read (the bad byte a replacement character)', async () => {
    const body = Buffer.concat([Buffer.from('{"title":"caf'), Buffer.from([0xe9]), Buffer.from('"}')]);
    const r = await post(gen.ingest_url, body, { 'content-type': 'application/json' });
    expect(r.status).toBe(202);
    expect(await todo(r.json.id)).toMatchObject({ title: 'caf\ufffd', payload: { title: 'caf\ufffd' } });
    const [ev] = await db.sql<{ payload: Buffer }[]>`select e.payload from events e join todos t on t.event_id = e.id where t.id = ${r.json.id}`;
    expect(Buffer.compare(ev!.payload, body)).toBe(0);
  });
});
