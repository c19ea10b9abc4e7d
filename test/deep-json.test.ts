import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { JSON_MAX_DEPTH } from '../src/domain/json-depth.ts';
import { createLogger } from '../src/lib/log.ts';
import { push, pushPath, vend, withApp } from './support/fixtures.ts';
import { initParams, mcp, request } from './support/mcp-transport.ts';

// Issue #17 item 10: JSON nested thousands deep answered 500/internal with an error-level stack
// trace. Every surface that stores or processes JSON now refuses it as invalid_argument naming
// the field, stores nothing, and logs nothing at error level.

const errorLines: string[] = [];
const log = createLogger(
  'info',
  new Writable({
    write: (c, _e, done) => {
      for (const line of c.toString().split('\n')) if (line && (JSON.parse(line) as { level: number }).level >= 50) errorLines.push(line);
      done();
    },
  }),
);
const f = withApp({ log });

/** JSON text of n nested arrays around 1. */
const deep = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`;
const TOO_DEEP = `must nest at most ${JSON_MAX_DEPTH} levels of arrays and objects`;

async function todoCount(endpointId: string): Promise<number> {
  const [row] = await f.sql<{ n: number }[]>`select count(*)::int as n from todos where endpoint_id = ${endpointId}`;
  return row!.n;
}

describe('deep JSON on /api/v1 (push payload)', () => {
  it('refuses a payload deeper than the limit with 400 naming payload; the limit itself is stored', async () => {
    const ep = await vend(f.api, { name: 'deep', queues: ['q'] });
    for (const n of [JSON_MAX_DEPTH + 1, 5_000, 30_000]) {
      const res = await f.api('POST', pushPath(ep.slug), `{"title":"deep","payload":${deep(n)}}`);
      expect(res.status, `${n}: ${res.text.slice(0, 200)}`).toBe(400);
      expect(res.json, String(n)).toEqual({ code: 'invalid_argument', field: 'payload', error: `payload: ${TOO_DEEP}` });
    }
    // The whole body as deep as the 64 KiB body limit allows: still a 400, never a 500.
    const body = await f.api('POST', pushPath(ep.slug), deep(32_000));
    expect(body.status).toBe(400);
    expect(body.json).toMatchObject({ code: 'invalid_argument' });
    expect(await todoCount(ep.id)).toBe(0);

    const ok = await push(f.api, ep, { title: 'at the limit', payload: JSON.parse(deep(JSON_MAX_DEPTH)) });
    const [stored] = await f.sql<{ payload: unknown }[]>`select payload from todos where id = ${ok.id}`;
    expect(JSON.stringify(stored!.payload)).toBe(deep(JSON_MAX_DEPTH));
    expect(errorLines).toEqual([]);
  });
});

describe('deep JSON over MCP (complete and fail results, raw JSON-RPC)', () => {
  it('refuses a deep result as invalid_argument naming result; the todo stays claimed with no result', async () => {
    const ep = await vend(f.api, { name: 'deep-agent', queues: ['q'], verbs: ['claim_next', 'complete', 'fail', 'get_todo'] });
    const pushed = await push(f.api, ep, { title: 'work' });
    const init = await mcp(ep, 'POST', { body: request('initialize', initParams()) });
    expect(init.status).toBe(200);
    const sid = init.headers.get('mcp-session-id')!;
    const call = async (name: string, args: string) => {
      const res = await mcp(ep, 'POST', { sid, body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"${name}","arguments":${args}}}` });
      expect(res.status, res.text.slice(0, 200)).toBe(200);
      return res.json.result as { isError?: boolean; structuredContent: any };
    };
    const claimed = await call('claim_next', '{}');
    expect(claimed.structuredContent.todo.id).toBe(pushed.id);

    for (const verb of ['complete', 'fail']) {
      for (const n of [JSON_MAX_DEPTH + 1, 5_000, 200_000]) {
        const out = await call(verb, `{"id":"${pushed.id}","result":${deep(n)}}`);
        expect(out.isError, `${verb} ${n}`).toBe(true);
        expect(out.structuredContent.error, `${verb} ${n}`).toEqual({ code: 'invalid_argument', field: 'result', message: `result: ${TOO_DEEP}` });
      }
    }
    const [row] = await f.sql<{ state: string; result: unknown }[]>`select state, result from todos where id = ${pushed.id}`;
    expect(row).toEqual({ state: 'claimed', result: null });

    // Deep JSON elsewhere in the message is not a 500 either.
    const meta = await mcp(ep, 'POST', { sid, body: `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":${deep(200_000)}}}` });
    expect(meta.status).toBeLessThan(500);
    const raw = await mcp(ep, 'POST', { sid, body: deep(500_000).slice(0, 1_000_000) });
    expect(raw.status).toBe(400);

    const done = await call('complete', `{"id":"${pushed.id}","result":${deep(JSON_MAX_DEPTH)}}`);
    expect(done.isError).toBeUndefined();
    expect(errorLines).toEqual([]);
  });
});

describe('deep JSON at webhook ingest', () => {
  it('refuses a body deeper than the limit with 400 naming body; no event, no todo', async () => {
    const ep = await vend(f.api, { name: 'deep-hook', queues: ['q'] });
    const minted = await f.api('POST', `/api/v1/endpoints/${ep.slug}/webhooks`, { source_type: 'generic' });
    expect(minted.status, minted.text).toBe(201);
    const url = minted.json.ingest_url as string;
    for (const n of [JSON_MAX_DEPTH + 1, 5_000, 1_000_000]) {
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"a":${deep(n)}}` });
      expect(res.status, String(n)).toBe(400);
      expect(await res.json()).toEqual({ code: 'invalid_argument', field: 'body', error: `body: ${TOO_DEEP}` });
    }
    expect(await todoCount(ep.id)).toBe(0);
    const [events] = await f.sql<{ n: number }[]>`select count(*)::int as n from events where webhook_id = ${minted.json.webhook_id}`;
    expect(events!.n).toBe(0);
    expect(errorLines).toEqual([]);
  });
});
