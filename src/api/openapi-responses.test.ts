import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { fullFormats } from 'ajv-formats/dist/formats.js';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import type { Api, ApiResponse, TestApp, TestDb } from '../../test/support/fixtures.ts';

// Every answer below comes from a real route and must match the schema the OpenAPI document gives
// for its status: the document says what the routes return, field for field (the wire schemas are
// closed, so an undocumented field fails as surely as a missing one).

type Schema = Record<string, unknown>;
type Operation = { responses: Record<string, { content?: { 'application/json'?: { schema: Schema } } }> };
type Document = { paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Schema> } };

let db: TestDb;
let app: TestApp;
let api: Api;
let document: Document;
const ajv = new Ajv2020({ allErrors: true, strict: true, formats: { 'date-time': fullFormats['date-time'] } });
const compiled = new Map<string, ValidateFunction>();

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url, undefined, {
    env: {
      SWITCHBOARD_SECRET_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      SWITCHBOARD_PUSH_ALLOW_HTTP: '1',
      SWITCHBOARD_NOTIFY_HOOK_ALLOW_CIDRS: '127.0.0.1/32',
    },
  });
  api = apiCaller(app.url, (await humanWithToken(db.sql)).token);
  document = (await (await fetch(`${app.url}/api/v1/openapi.json`)).json()) as Document;
});
afterAll(async () => {
  await app?.stop();
  await db?.drop();
});

/**
 * The validator for the documented answer of `method path` at `status`. The document's
 * `#/components/schemas/X` references become `#/$defs/X` of a standalone JSON Schema.
 */
function documented(method: string, path: string, status: number): ValidateFunction {
  const key = `${method} ${path} ${status}`;
  const cached = compiled.get(key);
  if (cached) return cached;
  const response = document.paths[path]?.[method.toLowerCase()]?.responses[String(status)];
  if (!response) throw new Error(`the document has no ${status} answer for ${method} ${path}`);
  const schema = response.content?.['application/json']?.schema;
  if (!schema) throw new Error(`the ${status} answer of ${method} ${path} has no JSON schema`);
  const standalone = JSON.parse(
    JSON.stringify({ ...schema, $defs: document.components.schemas }).replaceAll('"#/components/schemas/', '"#/$defs/'),
  ) as Schema;
  const validate = ajv.compile(standalone);
  compiled.set(key, validate);
  return validate;
}

/** Calls the route for real, expects `status`, and checks the answer against the document. */
async function call(method: string, path: string, documentedPath: string, status: number, body?: unknown): Promise<ApiResponse> {
  const res = await api(method, path, body);
  expect(res.status, `${method} ${path}: ${res.text}`).toBe(status);
  const validate = documented(method, documentedPath, status);
  expect(validate(res.json) ? [] : validate.errors, `${method} ${path} answered ${res.text}`).toEqual([]);
  return res;
}

describe('each route answers what the OpenAPI document says', () => {
  let slug = '';
  let todoId = '';

  it('me', async () => {
    await call('GET', '/api/v1/me', '/api/v1/me', 200);
  });

  it('endpoints: vend, list, get', async () => {
    const vended = await call('POST', '/api/v1/endpoints', '/api/v1/endpoints', 201, { name: 'documented', queues: ['inbox', 'reviews'] });
    slug = vended.json.slug;
    const listed = await call('GET', '/api/v1/endpoints', '/api/v1/endpoints', 200);
    expect(listed.json).toHaveLength(1);
    await call('GET', `/api/v1/endpoints/${slug}`, '/api/v1/endpoints/{ref}', 200);
  });

  it('todos: push (created, and a repeated key), list, show, cancel', async () => {
    const path = '/api/v1/endpoints/{ref}/todos';
    const pushed = await call('POST', `/api/v1/endpoints/${slug}/todos`, path, 201, { title: 'Review the door', queue: 'reviews', key: 'door', priority: 3, payload: { pr: 7 } });
    todoId = pushed.json.id;
    await call('POST', `/api/v1/endpoints/${slug}/todos`, path, 200, { title: 'Review the door', queue: 'reviews', key: 'door' });
    await call('POST', `/api/v1/endpoints/${slug}/todos`, path, 201, { title: 'Later', queue: 'inbox', delay: '10m' });
    const listed = await call('GET', `/api/v1/endpoints/${slug}/todos?limit=1`, path, 200);
    expect(listed.json.next_cursor).toEqual(expect.any(String));
    await call('GET', `/api/v1/endpoints/${slug}/todos/${todoId}`, `${path}/{id}`, 200);
    await call('POST', `/api/v1/endpoints/${slug}/todos/${todoId}/cancel`, `${path}/{id}/cancel`, 200, {});
  });

  it('presence: get, put, delete, and the shift', async () => {
    const path = '/api/v1/endpoints/{ref}/presence';
    await call('GET', `/api/v1/endpoints/${slug}/presence`, path, 200);
    const until = new Date(app.clock.now().getTime() + 3_600_000).toISOString();
    const out = await call('PUT', `/api/v1/endpoints/${slug}/presence`, path, 200, { presence: 'out', until });
    expect(out.json.until).not.toBeNull();
    await call('DELETE', `/api/v1/endpoints/${slug}/presence`, path, 200);
    const shifted = await call('PUT', `/api/v1/endpoints/${slug}/shift`, '/api/v1/endpoints/{ref}/shift', 200, { shift: 'TZ=UTC Mon-Fri 09:00-17:00' });
    expect(shifted.json.shift).toEqual(expect.any(String));
  });

  it('doorbell tests: start, and the report', async () => {
    const path = '/api/v1/endpoints/{ref}/doorbell-tests';
    const started = await call('POST', `/api/v1/endpoints/${slug}/doorbell-tests`, path, 201, {});
    await call('GET', `/api/v1/endpoints/${slug}/doorbell-tests/${started.json.test_id}`, `${path}/{test_id}`, 200);
  });

  it('webhooks: create (signed and token), list, a delivery in the events, rotate, delete', async () => {
    const path = '/api/v1/endpoints/{ref}/webhooks';
    const signed = await call('POST', `/api/v1/endpoints/${slug}/webhooks`, path, 201, { source_type: 'github', target_queue: 'reviews' });
    expect(signed.json.signing_secret).toEqual(expect.any(String));
    const generic = await call('POST', `/api/v1/endpoints/${slug}/webhooks`, path, 201, { source_type: 'generic', target_queue: 'inbox' });
    await call('GET', `/api/v1/endpoints/${slug}/webhooks`, path, 200);
    const delivered = await fetch(generic.json.ingest_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-event-type': 'build.failed', 'x-delivery-id': 'build-1' },
      body: JSON.stringify({ title: 'Nightly build failed' }),
    });
    expect(delivered.status).toBe(202);
    const events = await call('GET', `/api/v1/events?endpoint=${slug}`, '/api/v1/events', 200);
    expect(events.json.events[0]).toMatchObject({ source: 'generic', event_type: 'build.failed', disposition: 'routed' });
    await call('POST', `/api/v1/webhooks/${signed.json.webhook_id}/rotate`, '/api/v1/webhooks/{id}/rotate', 200);
    await call('DELETE', `/api/v1/webhooks/${generic.json.webhook_id}`, '/api/v1/webhooks/{id}', 200);
  });

  it('notify hooks: create, list, rotate, delete', async () => {
    // An endpoint of its own, with nothing pushed: no delivery is attempted to the hook's URL.
    const quiet = (await call('POST', '/api/v1/endpoints', '/api/v1/endpoints', 201, { name: 'hooked', queues: ['inbox'] })).json.slug;
    const path = '/api/v1/endpoints/{ref}/hooks';
    const created = await call('POST', `/api/v1/endpoints/${quiet}/hooks`, path, 201, { url: 'http://127.0.0.1:9/hook?token=abc', ignore_presence: true });
    const listed = await call('GET', `/api/v1/endpoints/${quiet}/hooks`, path, 200);
    expect(listed.json.hooks).toHaveLength(1);
    await call('POST', `/api/v1/hooks/${created.json.hook_id}/rotate`, '/api/v1/hooks/{id}/rotate', 200);
    await call('DELETE', `/api/v1/hooks/${created.json.hook_id}`, '/api/v1/hooks/{id}', 200);
  });

  it('revoke, and an error answer in the envelope', async () => {
    await call('POST', `/api/v1/endpoints/${slug}/revoke`, '/api/v1/endpoints/{ref}/revoke', 200);
    await call('GET', `/api/v1/endpoints/${slug}/presence`, '/api/v1/endpoints/{ref}/presence', 409);
  });
});

describe('the documented schemas are strict enough to catch a drift', () => {
  it('refuses an answer missing a field, with an extra field, or with a field of the wrong type', async () => {
    const validate = documented('GET', '/api/v1/endpoints/{ref}', 200);
    const vended = await api('POST', '/api/v1/endpoints', { name: 'strict', queues: ['inbox'] });
    const endpoint = (await api('GET', `/api/v1/endpoints/${vended.json.slug}`)).json as Record<string, unknown>;
    expect(validate(endpoint)).toBe(true);
    const { shift: _dropped, ...missing } = endpoint;
    expect(validate(missing)).toBe(false);
    expect(validate({ ...endpoint, colour: 'red' })).toBe(false);
    expect(validate({ ...endpoint, created_at: 'yesterday' })).toBe(false);
    expect(validate({ ...endpoint, presence: { ...(endpoint.presence as object), source: 'mood' } })).toBe(false);
  });
});
