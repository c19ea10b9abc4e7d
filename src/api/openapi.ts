import type { FastifyInstance, RouteOptions } from 'fastify';
import { z } from 'zod';
import { HTTP_STATUS } from '../web/errors.ts';
import type { RefusalReason } from './auth.ts';
import { oauthPaths, oauthSecurityScheme } from './openapi-oauth.ts';

// GET /api/v1/openapi.json: an OpenAPI 3.1 document built from the routes as registered. Each
// /api/v1 route carries its RouteDoc in its options (`doc({...})`), with the very zod schemas its
// handler parses the body and query with, and the wire schema (api/wire.ts) its answer is typed
// with, so the document cannot drift from what is validated and returned.
// A route registered without a RouteDoc makes the document fail to build (the test catches it).

export interface RouteDoc {
  summary: string;
  /** Tag grouping the route in the document. */
  tag: 'endpoints' | 'todos' | 'presence' | 'doorbell tests' | 'webhooks' | 'notify hooks' | 'account';
  body?: z.ZodType;
  query?: z.ZodType;
  /** The success answer: its status and what it carries. */
  ok: {
    status: 200 | 201;
    description: string;
    /** A second success status with the same body (a push answers 200 when a live todo holds the key). */
    alsoStatus?: 200 | 201;
  };
  /** The success answer's schema, from api/wire.ts: the one the handler's return type is inferred from. */
  response: z.ZodType;
  /** Statuses this route answers besides the ones every route can (409 on a revoked endpoint, ...). */
  errors?: readonly number[];
}

declare module 'fastify' {
  interface FastifyContextConfig {
    openapi?: RouteDoc;
  }
}

/** Route options carrying the route's documentation. */
export const doc = (d: RouteDoc) => ({ config: { openapi: d } });

interface SeenRoute {
  method: string;
  url: string;
  doc: RouteDoc | undefined;
}

const ERROR_ENVELOPE = z
  .object({
    error: z.string().describe('What went wrong, for a person; names the field for invalid_argument'),
    code: z.enum(Object.keys(HTTP_STATUS) as [string, ...string[]]).describe('The error family, stable for programs'),
    field: z.string().optional().describe('The request field at fault (invalid_argument)'),
    retry_after: z.number().optional().describe('Seconds to wait (rate_limited, unavailable); also the Retry-After header'),
    reason: z
      .enum(['missing', 'endpoint_credential', 'revoked', 'unknown'] satisfies RefusalReason[])
      .optional()
      .describe('401 only: no token, an endpoint credential (sbk_), a revoked personal token, or a token this server does not know'),
  })
  .catchall(z.unknown())
  .describe('Every error answer: the same envelope on every route');

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'invalid_argument: a field is missing or malformed (named in `error` and `field`)',
  401: 'unauthenticated: no personal token, or one that is unknown or revoked',
  404: 'not_found: no such route, or not one of your own endpoints (another human\'s answers the same)',
  409: 'conflict or failed_precondition: the endpoint is revoked, or the todo is not in a state that allows this',
  413: 'payload_too_large: the body is over the limit',
  415: 'unsupported_media_type: the body is not application/json',
  429: 'rate_limited: too many requests with this token or from this address; see Retry-After',
  503: 'unavailable: the database cannot be reached; retry after Retry-After',
};

/** What zod emits for z.json() under `$defs/<key>`: a union that refers to itself. */
function isJsonValue(def: unknown, key: string): boolean {
  const self = { $ref: `#/$defs/${key}` };
  const scalars = ['string', 'number', 'boolean', 'null'].map((type) => ({ type }));
  const containers = [{ type: 'array', items: self }, { type: 'object', propertyNames: { type: 'string' }, additionalProperties: self }];
  return JSON.stringify(def) === JSON.stringify({ anyOf: [...scalars, ...containers] });
}

/**
 * Any JSON value, as the document gives it. Not the recursive union zod emits: the TypeScript a
 * generator such as openapi-typescript writes for a union holding an array of itself does not
 * compile (TS2502), and in a JSON body the empty schema means exactly "any JSON value".
 */
const JSON_VALUE = { description: 'Any JSON value: a string, number, boolean, null, array or object' };

/**
 * A zod schema as JSON Schema 2020-12 (the dialect of OpenAPI 3.1): `input` for what a route
 * accepts, `output` for what it answers. Definitions zod emits under `$defs` move to
 * components.schemas, where a `$ref` inside the document can reach them: a wire type named with
 * `.meta({ id })` keeps its name, z.json() becomes JsonValue, any other anonymous one (a
 * recursive type) is named JsonN, and identical anonymous definitions share one entry.
 */
function toJsonSchema(schema: z.ZodType, components: Map<string, string>, io: 'input' | 'output'): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, unknown>;
  const { $schema: _dialect, $defs: defs = {}, ...rest } = out as { $schema?: string; $defs?: Record<string, unknown> };
  const anonymous = (key: string) => key.startsWith('__schema');
  const names = new Map<string, string>();
  let jsonCount = [...components.keys()].filter((name) => /^Json\d+$/.test(name)).length;
  for (const key of Object.keys(defs)) {
    if (anonymous(key) && isJsonValue(defs[key], key)) {
      defs[key] = JSON_VALUE;
      names.set(key, 'JsonValue');
    } else names.set(key, anonymous(key) ? `Json${jsonCount++}` : key);
  }
  const rewrite = (value: unknown) =>
    JSON.parse(JSON.stringify(value).replace(/"#\/\$defs\/([^"]+)"/g, (_m, key: string) => JSON.stringify(`#/components/schemas/${names.get(key)}`)));
  const defsText = new Map([...names].map(([key, name]) => [name, JSON.stringify(rewrite(defs[key]))]));
  // Reuse an identical definition already in the document under its name.
  const reuse = new Map<string, string>();
  for (const [name, text] of defsText) {
    if (!/^Json\d+$/.test(name)) {
      const known = components.get(name);
      if (known !== undefined && known !== text) throw new Error(`two different schemas are named ${name}`);
      components.set(name, text);
      continue;
    }
    const existing = [...components].find(([, t]) => t === text)?.[0];
    if (existing) reuse.set(name, existing);
    else components.set(name, text);
  }
  let result = JSON.stringify(rewrite(rest));
  for (const [name, existing] of reuse) result = result.replaceAll(`#/components/schemas/${name}"`, `#/components/schemas/${existing}"`);
  return JSON.parse(result) as Record<string, unknown>;
}

/** `/endpoints/:ref/todos/:id` as OpenAPI writes it, and its path parameter names. */
function openApiPath(url: string): { path: string; params: string[] } {
  const params: string[] = [];
  const path = url.replace(/:([A-Za-z_]+)/g, (_m, name: string) => {
    params.push(name);
    return `{${name}}`;
  });
  return { path, params };
}

const PARAM_DESCRIPTIONS: Record<string, string> = {
  ref: 'An endpoint of yours: its slug or its id',
  id: 'The todo, webhook or notify hook id',
  test_id: 'The doorbell self-test id',
};

function operation(route: SeenRoute & { doc: RouteDoc }, components: Map<string, string>): Record<string, unknown> {
  const jsonSchema = (schema: z.ZodType, io: 'input' | 'output' = 'input') => toJsonSchema(schema, components, io);
  const d = route.doc;
  const { params } = openApiPath(route.url);
  const parameters: Record<string, unknown>[] = params.map((name) => ({
    name,
    in: 'path',
    required: true,
    description: PARAM_DESCRIPTIONS[name],
    schema: { type: 'string' },
  }));
  if (d.query) {
    const q = jsonSchema(d.query) as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
    for (const [name, schema] of Object.entries(q.properties ?? {})) {
      parameters.push({ name, in: 'query', required: q.required?.includes(name) ?? false, schema });
    }
  }
  const statuses = new Set<number>([401, 429, 503, ...(d.errors ?? [])]);
  if (d.body || d.query || params.length > 0) statuses.add(400);
  if (params.length > 0 || d.query) statuses.add(404);
  if (d.body) [413, 415].forEach((s) => statuses.add(s));
  const success = { description: d.ok.description, content: { 'application/json': { schema: jsonSchema(d.response, 'output') } } };
  const responses: Record<string, unknown> = { [d.ok.status]: success, ...(d.ok.alsoStatus ? { [d.ok.alsoStatus]: success } : {}) };
  for (const status of [...statuses].sort()) {
    responses[status] = { description: ERROR_DESCRIPTIONS[status] ?? 'error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
  }
  return {
    operationId: `${route.method.toLowerCase()}${openApiPath(route.url).path.replace(/\/api\/v1/, '').replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
    summary: d.summary,
    tags: [d.tag],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(d.body ? { requestBody: { required: false, content: { 'application/json': { schema: jsonSchema(d.body) } } } } : {}),
    responses,
  };
}

/** The document for the routes seen; throws naming any /api/v1 route registered without a RouteDoc. */
export function openApiDocument(routes: readonly SeenRoute[], info: { version: string; serverUrl: string }): Record<string, unknown> {
  const undocumented = routes.filter((r) => !r.doc).map((r) => `${r.method} ${r.url}`);
  if (undocumented.length > 0) throw new Error(`routes without an OpenAPI RouteDoc: ${undocumented.join(', ')}`);
  const paths: Record<string, Record<string, unknown>> = {};
  const components = new Map<string, string>();
  for (const route of routes as (SeenRoute & { doc: RouteDoc })[]) {
    const { path } = openApiPath(route.url);
    (paths[path] ??= {})[route.method.toLowerCase()] = operation(route, components);
  }
  const shared = Object.fromEntries([...components].map(([name, text]) => [name, JSON.parse(text) as unknown]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'Switchboard operator API',
      version: info.version,
      description: 'The HTTP API for the humans who own endpoints. Every /api/v1 route takes a personal token (sbp_...) or an OAuth access token of an API grant as a bearer credential; the OAuth routes take none.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: info.serverUrl }],
    security: [{ personalToken: [] }, { oauth: ['operator'] }],
    paths: { ...paths, ...oauthPaths() },
    components: {
      securitySchemes: { personalToken: { type: 'http', scheme: 'bearer', description: 'A personal token: switchboard admin token create <handle>' }, oauth: oauthSecurityScheme },
      schemas: { Error: toJsonSchema(ERROR_ENVELOPE, components, 'output'), ...shared },
    },
  };
}

/**
 * Records every route registered under `prefix` from now on (call before registering them), and
 * serves the document built from them at `<prefix>/openapi.json`, without a credential.
 */
export function registerOpenApi(app: FastifyInstance, opts: { prefix: string; version: string; baseUrl: () => string }): void {
  const seen: SeenRoute[] = [];
  const docPath = `${opts.prefix}/openapi.json`;
  app.addHook('onRoute', (route: RouteOptions) => {
    if (!route.url.startsWith(`${opts.prefix}/`) || route.url === docPath) return;
    for (const method of [route.method].flat()) {
      if (method === 'HEAD') continue;
      seen.push({ method, url: route.url, doc: route.config?.openapi });
    }
  });
  let built: Record<string, unknown> | undefined;
  app.get(docPath, async () => (built ??= openApiDocument(seen, { version: opts.version, serverUrl: opts.baseUrl() })));
}
