import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { SELF_VERBS } from '../../domain/scope.ts';
import { AuthorizeRefusal, type AuthorizationRequest, type OAuthServer } from '../../services/oauth.ts';
import { BOARD_CSP } from '../csp.ts';
import { sendPage } from '../error-page.ts';
import { field, formOf } from '../form.ts';
import { consentPage, consentRefusedPage } from '../views/oauth-consent.ts';

/** The authorization request's parameters the consent form carries to the approval. */
const CARRIED = ['client_id', 'redirect_uri', 'state', 'code_challenge', 'code_challenge_method', 'resource', 'response_type'] as const;

export interface ConsentRouteDeps {
  oauth: OAuthServer;
}

/**
 * `/oauth/authorize` (issue 38): behind the board's sign-in (an anonymous request is sent to sign
 * in and brought back here, see plugin.ts), a page naming the client, its redirect host and what
 * the grant reaches; Approve or Deny with the session's CSRF token. An approval redirects to the
 * client with a single-use code; a refusal the client may hear redirects with the OAuth error.
 */
export function registerConsentRoutes(board: FastifyInstance, deps: ConsentRouteDeps): void {
  const { oauth } = deps;

  const paramsOf = (source: Record<string, string | string[] | undefined>): Record<string, string | undefined> => {
    const out: Record<string, string | undefined> = {};
    for (const k of CARRIED) {
      const v = source[k];
      out[k] = Array.isArray(v) ? undefined : v;
    }
    return out;
  };

  /** The checked request, or the answer already sent for a refusal. */
  const check = async (req: FastifyRequest, reply: FastifyReply, params: Record<string, string | undefined>): Promise<AuthorizationRequest | null> => {
    const s = req.boardSession!;
    try {
      return await oauth.checkAuthorization(params, s.human);
    } catch (err) {
      if (!(err instanceof AuthorizeRefusal)) throw err;
      reply.header('cache-control', 'no-store');
      if (!err.redirect) {
        await sendPage(reply, 400, consentRefusedPage(s, err.error.description));
        return null;
      }
      await reply.redirect(oauth.redirectWith(err.redirect.uri, { error: err.error.error, error_description: err.error.description, state: err.redirect.state }), 303);
      return null;
    }
  };

  board.get('/oauth/authorize', async (req, reply) => {
    const request = await check(req, reply, paramsOf(req.query as Record<string, string | string[] | undefined>));
    if (!request) return reply;
    const fields: Record<string, string> = {};
    for (const [k, v] of Object.entries({
      client_id: request.client.client_id,
      redirect_uri: request.redirectUri,
      state: request.state,
      code_challenge: request.codeChallenge,
      code_challenge_method: 'S256',
      resource: request.resource.uri,
      response_type: 'code',
    })) {
      if (v !== undefined) fields[k] = v;
    }
    const redirect = new URL(request.redirectUri);
    const e = request.endpoint;
    // The form's answer is a redirect to the client: the policy lets a form lead there, and nowhere else.
    const target = redirect.protocol === 'http:' || redirect.protocol === 'https:' ? redirect.origin : redirect.protocol;
    reply.header('content-security-policy', BOARD_CSP.replace("form-action 'self'", `form-action 'self' ${target}`));
    reply.header('cache-control', 'no-store');
    return sendPage(
      reply,
      200,
      consentPage(req.boardSession!, {
        clientName: request.client.client_name,
        clientId: request.client.client_id,
        redirectHost: redirect.host || redirect.protocol,
        fields,
        grant: e
          ? { kind: 'endpoint', slug: e.slug, agent: e.agent_name, queues: e.scope_queues, verbs: e.scope_verbs.filter((v) => !(SELF_VERBS as readonly string[]).includes(v)) }
          : { kind: 'api' },
      }),
    );
  });

  board.post('/oauth/authorize', async (req, reply) => {
    const form = formOf(req);
    const request = await check(req, reply, paramsOf(form));
    if (!request) return reply;
    reply.header('cache-control', 'no-store');
    if (field(form, 'decision') !== 'approve') {
      return reply.redirect(oauth.redirectWith(request.redirectUri, { error: 'access_denied', error_description: 'the human denied the request', state: request.state }), 303);
    }
    return reply.redirect(await oauth.approve(request, req.boardSession!.human), 303);
  });
}
