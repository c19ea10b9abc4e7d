import { describe, expect, it } from 'vitest';
import { expectError, NO_SUCH_UUID, operator, revoke, sql, useOperatorApiSuite, vend } from '../../test/support/operator-api.ts';

// /api/v1/endpoints/{ref}/presence over real HTTP: who may read or clear an endpoint's presence.

useOperatorApiSuite();

const presencePath = (ref: string) => `/api/v1/endpoints/${encodeURIComponent(ref)}/presence`;
const presenceColumns = async (id: string) =>
  (await sql`select presence_override, override_by, presence_written_by, presence_seen from endpoints where id = ${id}`)[0]!;

describe('GET and DELETE /api/v1/endpoints/{ref}/presence', () => {
  it("answer another human's endpoint (by slug or id) exactly like an unknown one: 404, and DELETE clears nothing", async () => {
    const owner = await operator();
    const stranger = await operator();
    const e = await vend(owner);
    expect((await owner.call('PUT', presencePath(e.slug), { presence: 'out', until: null })).status).toBe(200);
    const before = await presenceColumns(e.id);
    const unknown = await stranger.call('GET', presencePath('no-such-endpoint'));
    expectError(unknown, 404, 'not_found');
    for (const ref of [e.slug, e.id]) {
      for (const method of ['GET', 'DELETE']) {
        const res = await stranger.call(method, presencePath(ref));
        expectError(res, 404, 'not_found');
        expect(res.json.error).toBe(unknown.json.error.replace('no-such-endpoint', ref));
      }
    }
    expectError(await owner.call('DELETE', presencePath(NO_SUCH_UUID)), 404, 'not_found');
    expect(await presenceColumns(e.id)).toEqual(before);
  });

  it('answer a revoked endpoint with 409 conflict, and DELETE clears nothing', async () => {
    const owner = await operator();
    const e = await vend(owner);
    await owner.call('PUT', presencePath(e.slug), { presence: 'out', until: null });
    expect((await revoke(owner, e.slug)).status).toBe(200);
    const before = await presenceColumns(e.id);
    for (const method of ['GET', 'DELETE']) {
      const res = await owner.call(method, presencePath(e.slug));
      expect(res.status, res.text).toBe(409);
      expect(res.json).toMatchObject({ code: 'conflict', state: 'revoked', slug: e.slug });
    }
    expect(await presenceColumns(e.id)).toEqual(before);
  });
});
