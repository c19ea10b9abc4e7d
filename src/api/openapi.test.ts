import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { VERSION } from '../lib/version.ts';
import { apiCaller, humanWithToken, migratedDatabase, startTestApp } from '../../test/support/app.ts';
import type { TestApp } from '../../test/support/fixtures.ts';
import { openApiDocument } from './openapi.ts';

type Operation = {
  parameters?: { name: string; in: string; required: boolean; schema: Record<string, unknown> }[];
  requestBody?: { content: { 'application/json': { schema: { properties: Record<string, unknown>; required?: string[]; additionalProperties?: unknown } } } };
  responses: Record<string, { content: { 'application/json': { schema: { $ref?: string } } } }>;
};
type Document = { openapi: string; info: { version: string }; paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, unknown> } };

let db: Awaited<ReturnType<typeof migratedDatabase>>;
let app: TestApp;
let document: Document;

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url);
  const res = await fetch(`${app.url}/api/v1/openapi.json`);
  expect(res.status).toBe(200);
  document = (await res.json()) as Document;
});
afterAll(async () => {
  await app?.stop();
  await db?.drop();
});

describe('GET /api/v1/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document, served without a credential', async () => {
    const result = await new Validator().validate(document as unknown as Parameters<Validator['validate']>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(document.openapi).toBe('3.1.0');
    expect(document.info.version).toBe(VERSION);
  });

  it('lists every /api/v1 route the server answers, each with the error envelope', async () => {
    const operations = Object.entries(document.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    expect(operations.sort()).toEqual(
      [
        'GET /api/v1/me',
        'GET /api/v1/endpoints/{ref}/grants',
        'GET /api/v1/me/grants',
        'DELETE /api/v1/me/grants/{id}',
        'GET /api/v1/endpoints/{ref}/history',
        'DELETE /api/v1/endpoints/{ref}/grants/{id}',
        'GET /.well-known/oauth-authorization-server',
        'GET /.well-known/oauth-protected-resource/api',
        'GET /.well-known/oauth-protected-resource/mcp/{slug}',
        'POST /oauth/register',
        'GET /oauth/authorize',
        'POST /oauth/token',
        'POST /api/v1/endpoints',
        'GET /api/v1/endpoints',
        'GET /api/v1/endpoints/{ref}',
        'POST /api/v1/endpoints/{ref}/revoke',
        'POST /api/v1/endpoints/{ref}/todos',
        'GET /api/v1/endpoints/{ref}/todos',
        'GET /api/v1/endpoints/{ref}/todos/{id}',
        'POST /api/v1/endpoints/{ref}/todos/{id}/cancel',
        'POST /api/v1/endpoints/{ref}/todos/{id}/retry',
        'GET /api/v1/endpoints/{ref}/presence',
        'PUT /api/v1/endpoints/{ref}/presence',
        'DELETE /api/v1/endpoints/{ref}/presence',
        'GET /api/v1/endpoints/{ref}/presence/history',
        'PUT /api/v1/endpoints/{ref}/shift',
        'POST /api/v1/endpoints/{ref}/doorbell-tests',
        'GET /api/v1/endpoints/{ref}/doorbell-tests/{test_id}',
        'GET /api/v1/endpoints/{ref}/webhooks',
        'POST /api/v1/endpoints/{ref}/webhooks',
        'GET /api/v1/endpoints/{ref}/webhooks/{id}/rules',
        'PUT /api/v1/endpoints/{ref}/webhooks/{id}/rules',
        'POST /api/v1/endpoints/{ref}/webhooks/{id}/rules/test',
        'POST /api/v1/webhooks/{id}/rotate',
        'DELETE /api/v1/webhooks/{id}',
        'GET /api/v1/events',
        'GET /api/v1/endpoints/{ref}/hooks',
        'POST /api/v1/endpoints/{ref}/hooks',
        'POST /api/v1/hooks/{id}/rotate',
        'DELETE /api/v1/hooks/{id}',
      ].sort(),
    );
    // The OAuth routes (outside /api/v1) take no credential and answer OAuth's own errors.
    for (const [path, ops] of Object.entries(document.paths)) {
      if (!path.startsWith('/api/v1')) continue;
      for (const op of Object.values(ops)) {
        for (const status of ['401', '429', '503']) expect(op.responses[status]!.content['application/json'].schema.$ref).toBe('#/components/schemas/Error');
      }
    }
    expect(document.components.schemas.Error).toMatchObject({ required: ['error', 'code'] });
  });

  it('describes a request body with the schema the route validates with', async () => {
    const push = document.paths['/api/v1/endpoints/{ref}/todos']!.post!;
    const schema = push.requestBody!.content['application/json'].schema;
    expect(schema.required).toEqual(['title']);
    expect(Object.keys(schema.properties).sort()).toEqual(['delay', 'key', 'kind', 'max_attempts', 'payload', 'priority', 'queue', 'title']);
    expect(schema.additionalProperties).toBe(false);
    // The route refuses what the document leaves out, naming the field.
    const human = await humanWithToken(db.sql);
    const api = apiCaller(app.url, human.token);
    const vended = await api('POST', '/api/v1/endpoints', { name: 'documented', queues: ['inbox'] });
    const refused = await api('POST', `/api/v1/endpoints/${vended.json.slug}/todos`, { title: 'x', colour: 'red' });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toContain('colour');
  });

  it('describes query parameters from the route\'s query schema', async () => {
    const list = document.paths['/api/v1/endpoints/{ref}/todos']!.get!;
    const names = list.parameters!.map((p) => `${p.in}:${p.name}${p.required ? '!' : ''}`);
    expect(names).toEqual(['path:ref!', 'query:state', 'query:queue', 'query:limit', 'query:cursor']);
    const events = document.paths['/api/v1/events']!.get!;
    expect(events.parameters!.find((p) => p.name === 'endpoint')).toMatchObject({ in: 'query', required: true });
  });

  it('gives every success answer the schema of its wire type (api/wire.ts), by name', () => {
    for (const [path, ops] of Object.entries(document.paths)) {
      if (!path.startsWith('/api/v1')) continue;
      for (const [method, op] of Object.entries(ops)) {
        const success = Object.keys(op.responses).filter((s) => s.startsWith('2'));
        expect(success.length, `${method} ${path}`).toBeGreaterThan(0);
        for (const status of success) expect(op.responses[status]!.content['application/json'].schema, `${method} ${path} ${status}`).not.toEqual({});
      }
    }
    const ok = (path: string, method: string, status: string) => document.paths[path]![method]!.responses[status]!.content['application/json'].schema;
    expect(ok('/api/v1/endpoints/{ref}', 'get', '200')).toEqual({ $ref: '#/components/schemas/EndpointView' });
    expect(ok('/api/v1/endpoints', 'get', '200')).toEqual({ type: 'array', items: { $ref: '#/components/schemas/EndpointView' } });
    // A push answers 201, or 200 with the live todo holding the key: the same body either way.
    expect(ok('/api/v1/endpoints/{ref}/todos', 'post', '201')).toEqual({ $ref: '#/components/schemas/PushResult' });
    expect(ok('/api/v1/endpoints/{ref}/todos', 'post', '200')).toEqual({ $ref: '#/components/schemas/PushResult' });
    expect(Object.keys(document.components.schemas)).toEqual(
      expect.arrayContaining(['EndpointView', 'VendResult', 'TodoSummary', 'TodoDetail', 'PresenceView', 'DoorbellTestReport', 'MintedWebhookView', 'HookList', 'Timestamp']),
    );
    expect(document.components.schemas.EndpointView).toMatchObject({ additionalProperties: false, required: expect.arrayContaining(['id', 'slug', 'presence', 'sessions']) });
  });
});

describe('openApiDocument', () => {
  it('refuses to build when a route has no documentation, naming it', () => {
    expect(() => openApiDocument([{ method: 'GET', url: '/api/v1/secret', doc: undefined }], { version: '0', serverUrl: 'http://x' })).toThrow(
      'routes without an OpenAPI RouteDoc: GET /api/v1/secret',
    );
  });

  it('refuses two different schemas under one component name', () => {
    const route = (url: string, response: z.ZodType) => ({ method: 'GET', url, doc: { tag: 'account' as const, summary: url, ok: { status: 200 as const, description: 'x' }, response } });
    const routes = [route('/api/v1/a', z.object({ a: z.string() }).meta({ id: 'Twice' })), route('/api/v1/b', z.object({ b: z.string() }).meta({ id: 'Twice' }))];
    expect(() => openApiDocument(routes, { version: '0', serverUrl: 'http://x' })).toThrow('two different schemas are named Twice');
  });
});
