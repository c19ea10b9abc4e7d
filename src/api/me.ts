import type { FastifyInstance } from 'fastify';
import { doc } from './openapi.ts';
import { meViewSchema, type MeView } from './wire.ts';

/** The human the token belongs to (same guard and limits as all of /api/v1). */
export function registerMeRoutes(api: FastifyInstance): void {
  api.get('/me', doc({ tag: 'account', summary: 'The human the token belongs to', ok: { status: 200, description: '{id, handle, display_name, email}' }, response: meViewSchema }), async (req): Promise<MeView> => {
    const h = req.human!;
    return { id: h.id, handle: h.handle, display_name: h.display_name, email: h.email };
  });
}
