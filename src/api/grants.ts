import type { FastifyInstance, FastifyRequest } from 'fastify';
import { doc } from './openapi.ts';
import { grantListSchema, grantRevokedSchema, type GrantView } from './wire.ts';
import type { OAuthGrant, OAuthServer } from '../services/oauth.ts';
import { rfc3339 } from '../domain/time.ts';
import { isUuid } from '../domain/ids.ts';
import { notFound } from '../domain/errors.ts';

export const grantView = (g: OAuthGrant): GrantView => ({
  id: g.id,
  client_id: g.client_id,
  client_name: g.client_name,
  created_at: rfc3339(g.created_at),
  last_used_at: g.last_used_at ? rfc3339(g.last_used_at) : null,
});

/** The OAuth grants of an endpoint (clients connected by URL alone) and their revocation. */
export function registerGrantRoutes(api: FastifyInstance, deps: { oauth: OAuthServer }): void {
  const refOf = (req: FastifyRequest) => (req.params as { ref: string }).ref;

  api.get(
    '/endpoints/:ref/grants',
    doc({ tag: 'endpoints', summary: 'The endpoint\'s OAuth grants: clients that connected by URL alone', ok: { status: 200, description: '{grants}' }, response: grantListSchema }),
    async (req) => ({ grants: (await deps.oauth.grants(req.human!.id, refOf(req))).map(grantView) }),
  );

  api.get(
    '/me/grants',
    doc({ tag: 'account', summary: 'Your API grants: browser logins of the CLI (switchboard login) and any client acting as you', ok: { status: 200, description: '{grants}' }, response: grantListSchema }),
    async (req) => ({ grants: (await deps.oauth.apiGrants(req.human!.id)).map(grantView) }),
  );

  api.delete(
    '/me/grants/:id',
    doc({ tag: 'account', summary: 'Revoke one of your API grants: its tokens stop working at once', ok: { status: 200, description: '{grant_id, revoked: true}' }, response: grantRevokedSchema }),
    async (req) => {
      const { id } = req.params as { id: string };
      if (!isUuid(id)) throw notFound(`no grant ${id}`);
      const revoked = await deps.oauth.revokeApiGrant(req.human!.id, id);
      return { grant_id: revoked.id, revoked: true as const };
    },
  );

  api.delete(
    '/endpoints/:ref/grants/:id',
    doc({ tag: 'endpoints', summary: 'Revoke one OAuth grant: its tokens stop working at once', ok: { status: 200, description: '{grant_id, revoked: true}' }, response: grantRevokedSchema }),
    async (req) => {
      const { id } = req.params as { id: string };
      if (!isUuid(id)) throw notFound(`no grant ${id}`);
      const revoked = await deps.oauth.revokeGrant(req.human!.id, refOf(req), id);
      return { grant_id: revoked.id, revoked: true as const };
    },
  );
}
