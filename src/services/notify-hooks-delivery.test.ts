import { createServer as createNetServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  api,
  apiB,
  apiStrict,
  connect,
  createHook,
  db,
  expectSigned,
  health,
  hookView,
  listHooks,
  push,
  received,
  release,
  settle,
  target,
  until,
  useNotifyHooksSuite,
  vend,
  verifiedBy,
} from '../../test/support/notify-hooks.ts';

// Notify hooks end to end: delivery (retries, failures, disabling) and the agent verbs over MCP.

useNotifyHooksSuite();

const HOOK_VERBS = ['create_notify_hook', 'list_notify_hooks', 'rotate_notify_hook', 'delete_notify_hook'];

describe('delivery', () => {
  it('503 then 200: the same webhook-id twice, counted as delivered', async () => {
    const e = await vend();
    const t = target(503);
    const h = await createHook(e, { url: t.url });
    await push(e, 'retry me');
    await until(() => t.got().length === 2, 'the retry');
    await until(async () => (await health(h.hook_id)).last_status === 200, 'the recorded outcome');
    await settle();
    expect(t.got()).toHaveLength(2);
    const [first, second] = t.got();
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(second!.raw.equals(first!.raw)).toBe(true);
    // Marked as a hook delivery, so no Switchboard ingest turns it back into a todo.
    expect(first!.headers['x-switchboard-notify-hook']).toBe(h.hook_id);
    await expectSigned(t.got(), h.signing_secret);
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 0, last_error: null, enabled: true });
  });

  it('408 and 429 are retried too, up to three attempts in all', async () => {
    const e = await vend();
    const t = target(429, 408, 500);
    const h = await createHook(e, { url: t.url });
    await push(e, 'busy receiver');
    await until(() => t.got().length === 3, 'three attempts');
    await until(async () => (await health(h.hook_id)).last_status === 500, 'the recorded outcome');
    await settle();
    expect(t.got()).toHaveLength(3);
    expect(new Set(t.got().map((r) => r.headers['webhook-id'])).size).toBe(1);
    // Three attempts are one failed delivery.
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_error: 'http 500', enabled: true });
  });

  it('400 is not retried', async () => {
    const e = await vend();
    const t = target(400);
    const h = await createHook(e, { url: t.url });
    await push(e, 'bad request');
    await until(() => t.got().length === 1, 'the attempt');
    await until(async () => (await health(h.hook_id)).last_status === 400, 'the recorded outcome');
    await settle();
    expect(t.got()).toHaveLength(1);
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_error: 'http 400', enabled: true });
  });

  it('a 302 redirect is a failure, not followed and not retried', async () => {
    const e = await vend();
    const t = target(302);
    const h = await createHook(e, { url: t.url });
    await push(e, 'redirected');
    await until(() => t.got().length === 1, 'the attempt');
    await until(async () => (await health(h.hook_id)).last_status === 302, 'the recorded outcome');
    await settle();
    expect(t.got()).toHaveLength(1);
    expect(received.filter((r) => r.path === '/moved')).toEqual([]);
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_error: 'redirect refused' });
  });

  it('a receiver that never answers times out (instance B: 300 ms timeout, one attempt)', async () => {
    const e = await vend();
    const t = target('hang');
    const h = await createHook(e, { url: t.url });
    await push(e, 'slow receiver', { via: apiB });
    await until(() => t.got().length === 1, 'the attempt');
    await until(async () => (await health(h.hook_id)).last_error === 'timeout', 'the recorded timeout');
    expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_status: null });
  });

  it('the timeout bounds the whole attempt: a receiver trickling its answer byte by byte is cut off', async () => {
    // Each byte arrives well within the timeout, so only a deadline on the attempt as a whole ends it.
    const sockets: Socket[] = [];
    const slow = createNetServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => {});
      socket.write('HTTP/1.1 200 OK\r\n');
      const drip = setInterval(() => socket.write('x'), 50);
      socket.on('close', () => clearInterval(drip));
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    try {
      const e = await vend();
      const h = await createHook(e, { url: `http://127.0.0.1:${(slow.address() as { port: number }).port}/hook` });
      await push(e, 'trickled', { via: apiB });
      await until(() => sockets.length === 1, 'the connection');
      await until(async () => (await health(h.hook_id)).last_error === 'timeout', 'the attempt to time out', 3000);
      expect(await hookView(e, h.hook_id)).toMatchObject({ consecutive_failures: 1, last_status: null });
      await until(() => sockets[0]!.destroyed, 'the connection to be dropped');
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => slow.close(r));
    }
  });

  it('ten 500s in a row disable the hook (instance B: one attempt each); rotate re-enables it', async () => {
    const e = await vend();
    const t = target(...Array<number>(10).fill(500));
    const h = await createHook(e, { url: t.url });
    for (let i = 0; i < 10; i++) await push(e, `failing ${i}`, { via: apiB });
    await until(() => t.got().length === 10, 'ten attempts');
    await until(async () => (await health(h.hook_id)).enabled === false, 'the hook to be disabled');
    expect(await hookView(e, h.hook_id)).toMatchObject({
      enabled: false,
      disabled_reason: 'consecutive_failures',
      disabled_at: expect.any(String),
      consecutive_failures: 10,
      last_status: 500,
      last_error: 'http 500',
    });
    // A disabled hook is not called.
    await push(e, 'while disabled', { via: apiB });
    await settle();
    expect(t.got()).toHaveLength(10);

    const rotated = await api('POST', `/api/v1/hooks/${h.hook_id}/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.json).toMatchObject({ hook_id: h.hook_id, enabled: true, disabled_reason: null, disabled_at: null, consecutive_failures: 0 });
    expect(rotated.json.signing_secret).toMatch(/^whsec_/);
    expect(rotated.json.signing_secret).not.toBe(h.signing_secret);
    const id = await push(e, 'after rotate', { via: apiB });
    await until(() => t.got().length === 11, 'the delivery after rotation');
    const r = t.got()[10]!;
    expect(r.body.todo_id).toBe(id);
    expect(await verifiedBy(r, rotated.json.signing_secret)).toBe(1);
    await until(async () => (await health(h.hook_id)).last_status === 200, 'the recorded outcome');
    expect(await hookView(e, h.hook_id)).toMatchObject({ enabled: true, consecutive_failures: 0 });
  });

  it("one delivery per hook at a time; a deleted hook's queued deliveries are not sent", async () => {
    const e = await vend();
    const t = target('hang');
    const h = await createHook(e, { url: t.url });
    await push(e, 'held by the receiver');
    await until(() => t.got().length === 1, 'the first attempt');
    await push(e, 'queued 1');
    await push(e, 'queued 2');
    await settle();
    // The hook's next deliveries wait behind the one in flight.
    expect(t.got()).toHaveLength(1);
    // Deleted through instance B: this instance finds it gone at the next attempt.
    expect((await apiB('DELETE', `/api/v1/hooks/${h.hook_id}`)).status).toBe(200);
    release();
    await settle();
    expect(t.got()).toHaveLength(1);
  });

  it("a hook disabled on another instance (its tenth failure there) has its queued deliveries dropped here", async () => {
    const e = await vend();
    const t = target(...Array<number>(9).fill(500), 'hang', 500);
    const h = await createHook(e, { url: t.url });
    for (let i = 0; i < 9; i++) await push(e, `failing ${i}`, { via: apiB });
    await until(async () => (await health(h.hook_id)).consecutive_failures === 9, 'nine failed deliveries');
    await push(e, 'held by the receiver');
    await until(() => t.got().length === 10, 'the held attempt');
    await push(e, 'queued 1');
    await push(e, 'queued 2');
    await settle();
    expect(t.got()).toHaveLength(10);
    await push(e, 'the tenth failure', { via: apiB });
    await until(async () => (await health(h.hook_id)).enabled === false, 'the hook to be disabled');
    release();
    await settle();
    expect(t.got()).toHaveLength(11);
    expect(t.got().map((r) => r.body.summary)).not.toContain('queued 1');
  });

  it('the address is checked again before each attempt: an instance without the allow list refuses to call', async () => {
    const e = await vend();
    const t = target();
    const h = await createHook(e, { url: t.url });
    await push(e, 'through the strict instance', { via: apiStrict });
    await until(async () => (await health(h.hook_id)).consecutive_failures === 1, 'the refused attempt');
    const v = await hookView(e, h.hook_id);
    expect(v.last_status).toBeNull();
    expect(v.last_error).toMatch(/^rejected: url: must use https/);
    await settle();
    expect(t.got()).toEqual([]);
    // The same hook through an instance that allows it is called.
    await push(e, 'through the main instance');
    await until(() => t.got().length === 1, 'the allowed delivery');
  });
});

describe('agent verbs over MCP', () => {
  it('are not granted by a default vend', async () => {
    const e = await vend();
    const a = await connect(e);
    const names = (await a.client.listTools()).tools.map((t) => t.name);
    expect(names).toContain('claim');
    for (const verb of HOOK_VERBS) expect(names).not.toContain(verb);
    expect((await a.call('create_notify_hook', { url: target().url })).error).toMatch(/^forbidden: verb "create_notify_hook" is not granted/);
    expect((await listHooks(e)).hooks).toEqual([]);
  });

  it('manage only their own endpoint\'s hooks, within its scope', async () => {
    const verbs = ['list_todos', 'claim', ...HOOK_VERBS];
    const e = await vend({ verbs });
    const other = await vend({ verbs });
    const foreignHook = await createHook(other, { url: target().url });
    const a = await connect(e);
    const names = (await a.client.listTools()).tools.map((t) => t.name);
    for (const verb of HOOK_VERBS) expect(names).toContain(verb);

    const t = target();
    const created = await a.call('create_notify_hook', { url: t.url, queues: ['inbox'] });
    expect(created).toMatchObject({ hook_id: expect.any(String), queues: ['inbox'], ignore_presence: false, enabled: true, signing_secret: expect.stringMatching(/^whsec_/) });
    expect((await a.call('create_notify_hook', { url: t.url, queues: ['elsewhere'] })).error).toMatch(/^forbidden: queues: "elsewhere"/);
    expect((await a.call('create_notify_hook', { url: 'http://10.1.2.3/hook' })).error).toMatch(/^invalid_argument: url: .*not a public address/);

    const listed = await a.call('list_notify_hooks');
    expect(listed.ceiling).toEqual({ max: 5, used: 1 });
    expect(listed.hooks).toHaveLength(1);
    expect(listed.hooks[0]).toMatchObject({ hook_id: created.hook_id, consecutive_failures: 0, enabled: true, last_status: null });
    expect(listed.hooks[0].signing_secret).toBeUndefined();

    // Another endpoint's hook id is not found, and stays as it was.
    expect((await a.call('rotate_notify_hook', { hook_id: foreignHook.hook_id })).error).toMatch(/^not_found: /);
    expect((await a.call('delete_notify_hook', { hook_id: foreignHook.hook_id })).error).toMatch(/^not_found: /);
    expect((await listHooks(other)).hooks.map((x) => x.hook_id)).toEqual([foreignHook.hook_id]);
    const [foreignRow] = await db.sql`select rotated_at from notify_hooks where id = ${foreignHook.hook_id}`;
    expect(foreignRow!.rotated_at).toBeNull();

    // The agent's hook works, with the secret it was shown.
    const id = await push(e, 'for the agent hook', { queue: 'inbox' });
    await until(() => t.got().length === 1, 'the notification');
    expect(t.got()[0]!.body.todo_id).toBe(id);
    await expectSigned(t.got(), created.signing_secret);

    const rotated = await a.call('rotate_notify_hook', { hook_id: created.hook_id });
    expect(rotated.signing_secret).toMatch(/^whsec_/);
    expect(rotated.signing_secret).not.toBe(created.signing_secret);
    expect(await a.call('delete_notify_hook', { hook_id: created.hook_id })).toEqual({ hook_id: created.hook_id, deleted: true });
    expect((await a.call('list_notify_hooks')).hooks).toEqual([]);
  });
});