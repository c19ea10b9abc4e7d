import { beforeAll, describe, expect, it } from 'vitest';
import { NOTIFY_HOOK_VERBS, WEBHOOK_VERBS } from '../domain/scope.ts';
import { VERSION } from '../lib/version.ts';
import { vend as vendVia, withApp, type Api, type TestApp, type Vended } from '../../test/support/fixtures.ts';
import { connectAgent } from '../../test/support/agents.ts';

/** tools/list as an SDK client reads it: bounded schemas, annotations on every tool, whoami, and what a refusal says. */

const fixture = withApp({ refillMs: 60_000 });
let app: TestApp;
let api: Api;
beforeAll(() => void ({ app, api } = fixture));

const ALL_VERBS = ['list_todos', 'get_todo', 'claim', 'claim_next', 'heartbeat', 'complete', 'fail', 'release', ...WEBHOOK_VERBS, ...NOTIFY_HOOK_VERBS];
const SELF = ['clock_in', 'clock_out', 'presence', 'ack_doorbell', 'test_doorbell', 'get_doorbell_test', 'whoami'];
/** No bound in tools/list may be wider than this: a sane integer for any argument here. */
const SANE = 2 ** 31;

const vend = (body: Record<string, unknown> = {}): Promise<Vended> => vendVia(api, { name: 'Catalog Bot', queues: ['reviews', 'inbox'], ...body });

type Schema = Record<string, any>;

/** Every sub-schema of a JSON Schema, with the path that leads to it. */
function* walk(schema: Schema, path: string): Generator<[string, Schema]> {
  yield [path, schema];
  for (const [k, v] of Object.entries(schema.properties ?? {})) yield* walk(v as Schema, `${path}.${k}`);
  if (schema.items && typeof schema.items === 'object') yield* walk(schema.items as Schema, `${path}[]`);
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    for (const [i, v] of ((schema[key] as Schema[] | undefined) ?? []).entries()) yield* walk(v, `${path}|${key}${i}`);
  }
}

describe('tools/list', () => {
  it('gives every number finite, sane bounds and every string a maximum length', async () => {
    const agent = await connectAgent(app, await vend({ verbs: ALL_VERBS }), { track: fixture.clients });
    const { tools } = await agent.client.listTools();
    expect(tools.map((t) => t.name)).toEqual([...ALL_VERBS, ...SELF]);
    const problems: string[] = [];
    for (const tool of tools) {
      for (const [path, s] of walk(tool.inputSchema as Schema, tool.name)) {
        const text = JSON.stringify(s);
        if (text.includes('9007199254740991')) problems.push(`${path}: a ±2^53-1 bound`);
        if (s.type === 'integer' || s.type === 'number') {
          const lo = s.minimum ?? s.exclusiveMinimum;
          const hi = s.maximum ?? s.exclusiveMaximum;
          if (typeof lo !== 'number' || typeof hi !== 'number') problems.push(`${path}: ${s.type} without both bounds`);
          else if (Math.abs(lo) > SANE || Math.abs(hi) > SANE || lo > hi) problems.push(`${path}: ${s.type} bounds ${lo}..${hi}`);
        }
        if (s.type === 'string' && typeof s.maxLength !== 'number' && !s.pattern && !s.enum && !s.format) problems.push(`${path}: string without maxLength`);
        if (s.type === 'array' && typeof s.maxItems !== 'number') problems.push(`${path}: array without maxItems`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('carries MCP annotations on every tool, and only reads are marked read-only', async () => {
    const agent = await connectAgent(app, await vend({ verbs: ALL_VERBS }), { track: fixture.clients });
    const { tools } = await agent.client.listTools();
    for (const tool of tools) {
      expect(tool.annotations, tool.name).toEqual({
        title: expect.any(String),
        readOnlyHint: expect.any(Boolean),
        destructiveHint: expect.any(Boolean),
        idempotentHint: expect.any(Boolean),
        openWorldHint: expect.any(Boolean),
      });
      expect(tool.title, tool.name).toBe(tool.annotations!.title);
    }
    const readOnly = tools.filter((t) => t.annotations!.readOnlyHint).map((t) => t.name).sort();
    expect(readOnly).toEqual(['get_doorbell_test', 'get_todo', 'get_webhook_rules', 'list_notify_hooks', 'list_todos', 'list_webhooks', 'presence', 'test_webhook_rules', 'whoami']);
    expect(tools.filter((t) => t.annotations!.openWorldHint).map((t) => t.name)).toEqual(['create_notify_hook']);
    expect(tools.find((t) => t.name === 'delete_webhook')!.annotations).toMatchObject({ destructiveHint: true, readOnlyHint: false });
    // Rules replace rules: a write may undo the one before; writing the same rules again changes nothing more.
    expect(tools.find((t) => t.name === 'set_webhook_rules')!.annotations).toMatchObject({ destructiveHint: true, readOnlyHint: false, idempotentHint: true });
  });

  it('says to claim one todo at a time, never to drain everything at once', async () => {
    const agent = await connectAgent(app, await vend(), { track: fixture.clients });
    const { tools } = await agent.client.listTools();
    const claimNext = tools.find((t) => t.name === 'claim_next')!;
    expect(claimNext.description).toMatch(/claim ONE, do the work, complete it \(or fail or release it\), then claim the next/);
    expect(claimNext.description).toMatch(/300 s lease/);
    expect(claimNext.inputSchema.properties).toHaveProperty('wait');
    for (const t of tools) expect(t.description, t.name).not.toMatch(/Drain after every doorbell/i);
    expect(agent.client.getInstructions()).not.toMatch(/Drain them/);
    expect(agent.client.getInstructions()).toMatch(/one at a time/);
  });
});

describe('whoami', () => {
  it('answers who the session is, for an endpoint granted no drain verb at all', async () => {
    const e = await vend({ verbs: ['list_webhooks'], queues: ['reviews'] });
    const agent = await connectAgent(app, e, { track: fixture.clients });
    expect(await agent.call('whoami')).toEqual({
      endpoint: { slug: e.slug, name: 'Catalog Bot' },
      queues: ['reviews'],
      verbs: ['list_webhooks', ...SELF],
      presence: { presence: 'in', source: 'default', until: null, shift: null, pending: 0 },
      server: { name: 'switchboard', version: VERSION },
      session: { id: agent.sessionId, protocol_version: expect.any(String) },
    });
    expect((await agent.call('whoami', { endpoint: 'other' })).error).toMatch(/^invalid_argument: endpoint: unknown argument/);
  });

  it('reports presence as presence does, after a clock_out', async () => {
    const agent = await connectAgent(app, await vend(), { track: fixture.clients });
    await agent.call('clock_out');
    const me = await agent.call('whoami');
    expect(me.presence).toEqual(await agent.call('presence'));
    expect(me.presence).toMatchObject({ presence: 'out', source: 'agent' });
  });
});

describe('a verb not granted', () => {
  it('is refused naming the verbs that are granted, and pointing at whoami', async () => {
    const agent = await connectAgent(app, await vend({ verbs: ['list_todos', 'claim'] }), { track: fixture.clients });
    const r = await agent.call('complete', { id: 'td_00000000-0000-4000-8000-000000000000' });
    expect(r.error).toBe(`forbidden: verb "complete" is not granted to this endpoint; granted: ${['list_todos', 'claim', ...SELF].join(', ')} (whoami lists them)`);
    expect(r.details).toMatchObject({ code: 'forbidden', granted: ['list_todos', 'claim', ...SELF] });
  });
});
