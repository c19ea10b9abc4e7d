import { execFile } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedDatabase, startTestApp } from './support/app.ts';
import type { TestApp, TestDb } from './support/fixtures.ts';

/**
 * A client generated from GET /api/v1/openapi.json by openapi-typescript agrees with the wire
 * types the CLI reads (src/api/wire.ts): each documented success answer is assignable to the wire
 * type and back, checked by tsc in strict mode. The scratch directory sits inside the checkout so
 * the check can import src/ and node_modules; it is gitignored and removed afterwards.
 */
const run = promisify(execFile);
const root = fileURLToPath(new URL('..', import.meta.url));
const scratch = path.join(root, `.openapi-client-${process.pid}`);
const tsc = path.join(root, 'node_modules/typescript/bin/tsc');

/** Each wire type next to the documented answers that must equal it: [path, method, status]. */
const AGREEMENTS: Record<string, [string, 'get' | 'post' | 'put' | 'delete', number][]> = {
  MeView: [['/api/v1/me', 'get', 200]],
  'EndpointView[]': [['/api/v1/endpoints', 'get', 200]],
  EndpointView: [['/api/v1/endpoints/{ref}', 'get', 200]],
  VendResult: [['/api/v1/endpoints', 'post', 201]],
  RevokeResult: [['/api/v1/endpoints/{ref}/revoke', 'post', 200]],
  PushResult: [
    ['/api/v1/endpoints/{ref}/todos', 'post', 201],
    ['/api/v1/endpoints/{ref}/todos', 'post', 200],
  ],
  TodoList: [['/api/v1/endpoints/{ref}/todos', 'get', 200]],
  TodoDetail: [
    ['/api/v1/endpoints/{ref}/todos/{id}', 'get', 200],
    ['/api/v1/endpoints/{ref}/todos/{id}/cancel', 'post', 200],
    ['/api/v1/endpoints/{ref}/todos/{id}/retry', 'post', 200],
  ],
  PresenceView: [
    ['/api/v1/endpoints/{ref}/presence', 'get', 200],
    ['/api/v1/endpoints/{ref}/presence', 'put', 200],
    ['/api/v1/endpoints/{ref}/presence', 'delete', 200],
    ['/api/v1/endpoints/{ref}/shift', 'put', 200],
  ],
  PresenceHistory: [['/api/v1/endpoints/{ref}/presence/history', 'get', 200]],
  DoorbellTestStarted: [['/api/v1/endpoints/{ref}/doorbell-tests', 'post', 201]],
  DoorbellTestReport: [['/api/v1/endpoints/{ref}/doorbell-tests/{test_id}', 'get', 200]],
  WebhookList: [['/api/v1/endpoints/{ref}/webhooks', 'get', 200]],
  MintedWebhookView: [
    ['/api/v1/endpoints/{ref}/webhooks', 'post', 201],
    ['/api/v1/webhooks/{id}/rotate', 'post', 200],
  ],
  WebhookDeleted: [['/api/v1/webhooks/{id}', 'delete', 200]],
  EventList: [['/api/v1/events', 'get', 200]],
  HookList: [['/api/v1/endpoints/{ref}/hooks', 'get', 200]],
  MintedHookView: [
    ['/api/v1/endpoints/{ref}/hooks', 'post', 201],
    ['/api/v1/hooks/{id}/rotate', 'post', 200],
  ],
  HookDeleted: [['/api/v1/hooks/{id}', 'delete', 200]],
  ErrorEnvelope: [
    ['/api/v1/me', 'get', 401],
    ['/api/v1/endpoints/{ref}/todos', 'post', 400],
  ],
};

/** The .ts file that assigns each generated answer type to its wire type, and each wire type back. */
function agreementSource(): string {
  const wireNames = [...new Set(Object.keys(AGREEMENTS).map((name) => name.replace('[]', '')))].sort();
  const lines = [
    `import type { paths } from './client.ts';`,
    `import type { ${wireNames.join(', ')} } from '../src/api/wire.ts';`,
    '',
    '/** The JSON body of a documented answer; never when the document has none there. */',
    `type Answer<P extends keyof paths, M extends keyof paths[P], S extends number> =`,
    `  paths[P][M] extends { responses: { [K in S]: { content: { 'application/json': infer T } } } } ? T : never;`,
    '',
  ];
  let n = 0;
  for (const [wire, answers] of Object.entries(AGREEMENTS)) {
    for (const [p, method, status] of answers) {
      const answer = `Answer<'${p}', '${method}', ${status}>`;
      n += 1;
      lines.push(`export const fromDocument${n}: ${wire} = {} as ${answer};`, `export const toDocument${n}: ${answer} = {} as ${wire};`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** Generates the client from `document` and type-checks the agreement file against it. */
async function typeCheck(document: OpenAPI3): Promise<{ code: number; output: string }> {
  await writeFile(path.join(scratch, 'client.ts'), astToString(await openapiTS(document)));
  await writeFile(path.join(scratch, 'agreement.ts'), agreementSource());
  const args = [tsc, '--noEmit', '--strict', '--noUncheckedIndexedAccess', '--skipLibCheck', '--target', 'es2022'];
  args.push('--module', 'nodenext', '--moduleResolution', 'nodenext', '--allowImportingTsExtensions', '--verbatimModuleSyntax', '--types', 'node');
  try {
    const { stdout } = await run(process.execPath, [...args, path.join(scratch, 'client.ts'), path.join(scratch, 'agreement.ts')], { cwd: root });
    return { code: 0, output: stdout };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, output: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

let db: TestDb;
let app: TestApp;
let document: OpenAPI3;

beforeAll(async () => {
  db = await migratedDatabase();
  app = await startTestApp(db.url);
  const res = await fetch(`${app.url}/api/v1/openapi.json`);
  expect(res.status).toBe(200);
  document = (await res.json()) as OpenAPI3;
  await mkdir(scratch, { recursive: true });
});
afterAll(async () => {
  await app?.stop();
  await db?.drop();
  await rm(scratch, { recursive: true, force: true });
});

describe('a client generated from the OpenAPI document', () => {
  it('type-checks against the CLI\'s wire types in both directions', async () => {
    const { code, output } = await typeCheck(document);
    expect(output).toBe('');
    expect(code).toBe(0);
  }, 60_000);

  it('fails to type-check when the document drops a field', async () => {
    const dropped = structuredClone(document) as OpenAPI3 & { components: { schemas: Record<string, { properties: Record<string, unknown>; required: string[] }> } };
    const endpoint = dropped.components.schemas.EndpointView!;
    delete endpoint.properties.slug;
    endpoint.required = endpoint.required.filter((name) => name !== 'slug');
    const { code, output } = await typeCheck(dropped);
    expect(code).not.toBe(0);
    expect(output).toMatch(/Property 'slug' is missing/);
  }, 60_000);
});
