import { z } from 'zod';
import { VERSION } from '../../lib/version.ts';
import { defineTool, type Tool } from './tool.ts';

/**
 * whoami: what this session is. Every session may call it, whatever its grants: it is where a
 * refused agent looks to see what it may do.
 */
export const whoamiTool: Tool = defineTool({
  name: 'whoami',
  annotations: { title: 'Who am I', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  description:
    'Who this session is: the endpoint (slug and name), its queues, the verbs you may call, your presence (in or out, and why, as presence reports it), the server version and this session id.',
  input: z.object({}).strict(),
  async run(ctx) {
    const { endpoint } = ctx.session;
    return {
      endpoint: { slug: endpoint.slug, name: endpoint.agentName ?? null },
      queues: [...endpoint.queues],
      verbs: [...ctx.grantedVerbs],
      presence: await ctx.agentPresence.view(endpoint.id),
      server: { name: 'switchboard', version: VERSION },
      session: { id: ctx.session.id, protocol_version: ctx.session.protocolVersion },
    };
  },
});
